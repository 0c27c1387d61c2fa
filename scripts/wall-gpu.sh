#!/usr/bin/env bash
# The GPU checks quoted in issue 10's closing note, on a GPU machine with the staged
# binaries and tests (../shared/scripts/device-pack.sh --tests). Logs go to $OUT (or ./gpu-out).
#   scripts/wall-gpu.sh hostile     check-env, the sandbox probe, every tests/hostile case
#   scripts/wall-gpu.sh contention  two evals at once (lock on), then a disturbed one (lock off)
#   scripts/wall-gpu.sh honest      fast.cu, vec4.cu and the ten baselines, sandbox on and off
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out"
ns() { bash .device/gpu-run.sh nightshift "$@"; }
summary() {  # verdict JSON on stdin -> one line
  python3 -c '
import json,sys
v=json.load(sys.stdin); t=v.get("timing") or {}; f=v.get("failure") or {}
c=lambda s: (t.get(s) or {}).get("cv",0)*100
print("%-9s %-14s speedup %6.3f  CV base %5.2f%% cand %5.2f%%  repeats %s reliable %s  others %s  total %.2fs setup %.2fs  %s" % (
  v["status"], f.get("class",""), t.get("speedup",0), c("baseline"), c("candidate"), t.get("repeats"), t.get("reliable"),
  t.get("other_processes"), v["phases"]["total"], v["phases"]["setup"], " | ".join(v.get("notes",[]))[:300]))'
}
case "${1:-}" in
  hostile)
    ns check-env > "$out/check-env.txt" 2>&1; cat "$out/check-env.txt"
    mkdir -p /tmp/probe/scratch
    ns sandbox-probe --scratch /tmp/probe/scratch --outside /tmp/probe/escaped.txt > "$out/probe.json" 2>&1
    python3 -c 'import json; r=json.load(open("'"$out"'/probe.json")); [print(l) for l in r["layers"]]; [print(a["allowed"]==a["should_be_allowed"], a["action"], a["detail"]) for a in r["attempts"]]'
    t=$(ls .device/tests/hostile-* | head -1)
    NIGHTSHIFT_BIN="$PWD/.device/bin/nightshift" PATH="$PWD/.device/bin:/usr/local/cuda/bin:$PATH" \
      "$t" --ignored --nocapture --test-threads 1 > "$out/hostile.txt" 2>&1
    echo "hostile exit $?"; grep -E "^\||files outside|MISMATCH|panicked|expected" "$out/hostile.txt" | head -80
    ;;
  contention)
    for i in 1 2; do (ns eval tasks/softmax tests/candidates/softmax/fast.cu --json > "$out/together-$i.json" 2>"$out/together-$i.err"; echo "together $i exit $?") & done; wait
    for i in 1 2; do summary < "$out/together-$i.json"; done
    for i in 1 2; do (NIGHTSHIFT_GPU_LOCK=off ns eval tasks/gemm_f32 --json > "$out/disturbed-$i.json" 2>"$out/disturbed-$i.err"; echo "disturbed $i exit $?") & done; wait
    for i in 1 2; do summary < "$out/disturbed-$i.json"; done
    for i in 1 2; do (NIGHTSHIFT_GPU_LOCK=off ns eval tasks/softmax tests/candidates/softmax/fast.cu --json > "$out/disturbed-sm-$i.json" 2>/dev/null) & done; wait
    for i in 1 2; do summary < "$out/disturbed-sm-$i.json"; done
    ;;
  honest)
    for run in "softmax tests/candidates/softmax/fast.cu" "vector_add tests/candidates/vector_add/vec4.cu"; do
      set -- $run
      for sb in on off; do
        printf "%-10s %-5s sandbox %-3s " "$1" "$(basename "$2" .cu)" "$sb"
        NIGHTSHIFT_SANDBOX=$sb ns eval "tasks/$1" "$2" --json 2>/dev/null | summary
      done
    done
    for t in tasks/*/; do
      t=$(basename "$t")
      for sb in on off; do
        printf "%-10s base  sandbox %-3s " "$t" "$sb"
        NIGHTSHIFT_SANDBOX=$sb ns eval "tasks/$t" --json 2>/dev/null | summary
      done
    done
    ;;
esac
