#!/usr/bin/env bash
# Runs the verifier end to end on a GPU machine (staged with device-pack.sh) and prints
# one line per evaluation; full outputs go to $OUT/smoke.log (or ./smoke.log).
set -uo pipefail
log="${OUT:-.}/smoke.log"
: > "$log"
ns() { bash .device/gpu-run.sh nightshift "$@"; }
line() {  # line LABEL ARGS...: run eval, print exit code and the verdict's first lines
  local label=$1; shift
  local t0; t0=$(date +%s%N)
  local out; out=$(ns eval "$@" 2>&1); local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  printf '== %s (exit %s, %s ms)\n%s\n' "$label" "$rc" "$ms" "$out" >> "$log"
  printf '%-22s exit %s %6s ms  %s\n' "$label" "$rc" "$ms" "$(echo "$out" | sed -n 2p | cut -c1-150)"
}
ns check-env 2>&1 | tee -a "$log"
line softmax-baseline tasks/softmax
line softmax-fast tasks/softmax tests/candidates/softmax/fast.cu
for c in off_by_one skip_last_row writes_input cached illegal_address exits segfault wrong default_stream no_entry wrong_signature dlopen; do
  line "$c" tasks/softmax "tests/candidates/softmax/$c.cu" --timeout 30
done
line infinite_loop tasks/softmax tests/candidates/softmax/infinite_loop.cu --timeout 10
line vector_add tasks/vector_add
line vector_add-vec4 tasks/vector_add tests/candidates/vector_add/vec4.cu --energy --sanitize
