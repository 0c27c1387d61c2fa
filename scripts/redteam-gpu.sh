#!/usr/bin/env bash
# The red team's hostile suite (tests/hostile.rs) on a GPU machine, with the staged binaries
# and tests (../shared/scripts/device-pack.sh --tests). The table and the log go to $OUT (or
# ./gpu-out); each command stays under ten minutes.
#   scripts/redteam-gpu.sh 1/2     the red team's cases (rt_*), first half   (about 6 minutes)
#   scripts/redteam-gpu.sh 2/2     the red team's cases, second half         (about 6 minutes)
#   scripts/redteam-gpu.sh older   the 31 older cases                         (about 6 minutes)
#   scripts/redteam-gpu.sh CASES   a comma-separated list of names or patterns, e.g. rt_unix_*
# NIGHTSHIFT_HOSTILE_MODES=eval,diagnose narrows the modes.
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out"
what="${1:-1/2}"
t=$(ls .device/tests/hostile-* 2>/dev/null | head -1)
[ -x "$t" ] || { echo "no .device/tests/hostile-*: run ../shared/scripts/device-pack.sh --tests first"; exit 2; }
export NIGHTSHIFT_BIN="$PWD/.device/bin/nightshift" PATH="$PWD/.device/bin:/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
case "$what" in
  */*) export NIGHTSHIFT_HOSTILE_CASES='rt_*' NIGHTSHIFT_HOSTILE_SHARD="$what"; name="redteam-${what%/*}of${what#*/}" ;;
  older) export NIGHTSHIFT_HOSTILE_CASES='!rt_*'; name=older ;;
  *) export NIGHTSHIFT_HOSTILE_CASES="$what"; name=subset ;;
esac
NIGHTSHIFT_HOSTILE_REPORT="$out/$name.md" "$t" every_hostile_case --ignored --nocapture --test-threads 1 > "$out/$name.log" 2>&1
rc=$?
cat "$out/$name.md" 2>/dev/null || tail -50 "$out/$name.log"
echo "exit $rc (table: $out/$name.md, log: $out/$name.log)"
exit $rc
