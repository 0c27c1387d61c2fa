#!/usr/bin/env bash
# Captures the diagnosis corpus (heuristics/corpus, issue 23) on a GPU machine with the
# staged binary (../shared/scripts/device-pack.sh). For each entry:
#   nightshift diagnose ENTRY --out DIR --json   the baseline under ncu; DIR keeps
#                                                ncu_raw.csv, and the SASS (with lines)
#                                                and ptxas log of the build are copied in
#   nightshift eval ENTRY ENTRY/fix.cu --json    the fix checked and timed against the
#                                                baseline: its measured speedup
# into heuristics/corpus/NNN_slug/capture/ {ncu_raw.csv, sass.txt, ptxas.txt,
# diagnose.json, eval.json, log.txt}. Everything goes into one tarball in $OUT (or
# ./corpus-out), with a status table and the environment: at most 8 files, unpacked at
# the repository root with `tar xzf corpus-capture.tgz`.
#   scripts/capture-corpus.sh [ENTRY_DIR...]   (default: every heuristics/corpus/NNN_*)
# ENTRIES_FROM=N skips entries numbered below N (to finish a capture cut short);
# TIMEOUT (seconds, default 300) bounds each command; DEADLINE (seconds) starts no new
# entry once that long has passed, so a capture fits one device call and the next call
# goes on with ENTRIES_FROM set to the first entry left (printed at the end). FULL=1 also captures ncu's full set
# (`diagnose --full`) as capture/ncu_raw_full.csv, to hold the reduced set against it.
set -uo pipefail
out="${OUT:-corpus-out}"; mkdir -p "$out"
ns() { timeout "${TIMEOUT:-300}" bash .device/gpu-run.sh nightshift "$@"; }
entries=("$@")
if [ ${#entries[@]} -eq 0 ]; then
  for d in heuristics/corpus/[0-9][0-9][0-9]_*; do [ -f "$d/task.toml" ] && entries+=("$d"); done
fi
status="$out/status.tsv"
printf 'entry\tdiagnose\teval\tspeedup\ttop\n' > "$status"
started=$SECONDS; left=""
for d in "${entries[@]}"; do
  num=$(basename "$d" | cut -c1-3)
  [ -n "${ENTRIES_FROM:-}" ] && [ "$((10#$num))" -lt "$((10#$ENTRIES_FROM))" ] && continue
  if [ -n "${DEADLINE:-}" ] && [ $((SECONDS - started)) -ge "$DEADLINE" ]; then
    left="$num"; break
  fi
  cap="$d/capture"; rm -rf "$cap"; mkdir -p "$cap"
  ns diagnose "$d" --out "$cap/profile" --json > "$cap/diagnose.json" 2> "$cap/log.txt"
  drc=$?
  [ -f "$cap/profile/ncu_raw.csv" ] && mv "$cap/profile/ncu_raw.csv" "$cap/ncu_raw.csv"
  # The offline command printed on stderr names the build's SASS and ptxas log.
  sass=$(sed -n 's/.* --sass \([^ ]*\) .*/\1/p' "$cap/log.txt" | tail -1)
  ptxas=$(sed -n 's/.* --ptxas \([^ )]*\).*/\1/p' "$cap/log.txt" | tail -1)
  [ -n "$sass" ] && [ -f "$sass" ] && cp "$sass" "$cap/sass.txt"
  [ -n "$ptxas" ] && [ -f "$ptxas" ] && cp "$ptxas" "$cap/ptxas.txt"
  rm -rf "$cap/profile"   # the .ncu-rep report is large; the raw CSV is what the tools read
  if [ "${FULL:-0}" = 1 ]; then
    ns diagnose "$d" --full --out "$cap/full" --json > "$cap/diagnose-full.json" 2>> "$cap/log.txt"
    [ -f "$cap/full/ncu_raw.csv" ] && mv "$cap/full/ncu_raw.csv" "$cap/ncu_raw_full.csv"
    rm -rf "$cap/full"
  fi
  ns eval "$d" "$d/fix.cu" --json > "$cap/eval.json" 2>> "$cap/log.txt"
  erc=$?
  python3 - "$d" "$drc" "$erc" >> "$status" <<'PY'
import json, sys
d, drc, erc = sys.argv[1:4]
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return {}
v = load(f"{d}/capture/eval.json")
speed = (v.get("timing") or {}).get("speedup", "-")
ks = load(f"{d}/capture/diagnose.json").get("kernels") or []
top = ",".join(x["tool"] for x in (ks[0]["diagnoses"][:2] if ks else []))
print(f"{d.split('/')[-1]}\t{drc}\t{erc}:{v.get('status', '-')}\t{speed}\t{top}")
PY
  tail -1 "$status"
done
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ncu --version | tail -1; nvcc --version | tail -2; } > "$out/env.txt" 2>&1
if [ -n "$left" ]; then echo "deadline reached: go on with ENTRIES_FROM=$left" | tee "$out/left.txt"; fi
tar czf "$out/corpus-capture.tgz" heuristics/corpus/*/capture
ls -la "$out"
