#!/usr/bin/env bash
# The optimize runs quoted in the closing notes, on a GPU machine with the staged binaries
# (../shared/scripts/device-pack.sh). Run directories go to runs/; a tarball of them and
# the logs go to $OUT (or ./gpu-out).
#   scripts/optimize-gpu.sh smoke    vector_add (4 nodes) and the softmax replay run
#   scripts/optimize-gpu.sh tuner    softmax and gemm_f32 with the tuner, --guidance tools and none
#   scripts/optimize-gpu.sh collect  tar what is there into $OUT
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out" runs
ns() { bash .device/gpu-run.sh nightshift "$@"; }
case "${1:-}" in
  smoke)
    ns check-env > runs/check-env.txt 2>&1
    ns optimize tasks/vector_add --max-nodes 4 --out runs/vector_add-smoke > runs/vector_add-smoke.log 2>&1
    echo "vector_add smoke exit $?"; tail -12 runs/vector_add-smoke.log
    ns optimize tasks/softmax --generator replay:tests/replies/softmax --out runs/softmax-replay > runs/softmax-replay.log 2>&1
    echo "softmax replay exit $?"; tail -30 runs/softmax-replay.log
    ;;
  tuner)
    for task in softmax gemm_f32; do
      for g in tools none; do
        ns optimize "tasks/$task" --budget 10m --seed 1 --guidance "$g" --out "runs/$task-tune-$g" > "runs/$task-tune-$g.log" 2>&1
        echo "$task $g exit $?" >> runs/tuner-status.txt
      done
    done
    echo done >> runs/tuner-status.txt
    ;;
  collect)
    cat runs/tuner-status.txt 2>/dev/null
    for f in runs/*.log; do echo "== $f"; tail -12 "$f"; done
    ;;
esac
tar czf "$out/runs.tgz" runs 2>/dev/null
ls -la "$out"
