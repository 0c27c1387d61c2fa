#!/usr/bin/env bash
# Every recipe's default variant of every task and example, judged on a GPU: the wall's
# verdict and the speedup over the baseline, one row each. Needs the staged binaries
# (../shared/scripts/device-pack.sh); results go to $OUT (or ./gpu-out).
#   scripts/recipes-gpu.sh [TASK_DIR...]     (default: tasks/* and examples/*)
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out" rw
ns() { bash .device/gpu-run.sh nightshift "$@"; }
dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then
  # The bias + GELU + residual example becomes a task the way its README says.
  [ -d rw/bias_gelu_residual ] || ns init rw/tasks/bias_gelu_residual \
    --from examples/bias_gelu_residual/src/fused_epilogue.cu -I examples/bias_gelu_residual/include > /dev/null
  for d in tasks/* examples/* rw/tasks/*; do [ -f "$d/task.toml" ] && dirs+=("$d"); done
fi
one() {
  local t=$1 name; name=$(basename "$t")
  ns rewrite "$t" --out "rw/$name" --json > "rw/$name.json" 2> "rw/$name.err"
  for f in rw/"$name"/*.cu; do
    [ -f "$f" ] || continue
    ns eval "$t" "$f" --json > "$f.verdict.json" 2> "$f.err"
    python3 - "$f" <<'PY'
import json, sys
f = sys.argv[1]
try:
    v = json.load(open(f + ".verdict.json"))
except Exception as e:
    print(f"{f}\tno-verdict\t-\t{open(f + '.err').read()[-200:]!r}"); sys.exit()
fail = v.get("failure") or {}
t = v.get("timing") or {}
print(f"{f}\t{'passed' if v.get('status') == 'passed' else fail.get('class')}\t{t.get('speedup', '-')}\t{(fail.get('message') or '')[:160]}")
PY
  done
}
export -f one ns
printf '%s\n' "${dirs[@]}" | xargs -P 4 -I{} bash -c 'one {}' | tee "$out/recipes.tsv"
