#!/usr/bin/env bash
# One device session: the GPU tests, then the human-readable outputs the closing notes
# quote. Everything lands in $OUT (or ./gpu-out).
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out"
ns() { bash .device/gpu-run.sh nightshift "$@"; }
bash .device/gpu-run.sh .device/tests/gpu --ignored --test-threads=1 --nocapture > "$out/gpu-tests.log" 2>&1
echo "gpu tests exit $?"; grep -E "^test |test result" "$out/gpu-tests.log"
{
  ns check-env
  for t in softmax vector_add; do echo "== diagnose tasks/$t"; ns diagnose tasks/$t; done
  echo "== eval softmax fast"; ns eval tasks/softmax tests/candidates/softmax/fast.cu
  echo "== eval vector_add vec4 --energy --sanitize"; ns eval tasks/vector_add tests/candidates/vector_add/vec4.cu --energy --sanitize
  echo "== eval tasks/gemm_bf16 --json"; ns eval tasks/gemm_bf16 --json
} > "$out/human.log" 2>&1
grep -A3 "== eval tasks/gemm_bf16" "$out/human.log" | head -2; python3 - "$out/human.log" <<'PY'
import json, sys, re
text = open(sys.argv[1]).read()
j = text[text.index("== eval tasks/gemm_bf16 --json") + 31:]
v = json.loads(j[: j.rindex("}") + 1])
t = v["timing"]
for side in ("baseline", "candidate"):
    s = t[side]
    print(side, "median", s["median_ms"], "cv", round(s["cv"], 4), "min", s["min_ms"], "max", s["max_ms"], "rounds", [round(x, 4) for x in s["round_medians_ms"]][:12])
print("clocks", t["clocks"])
PY
