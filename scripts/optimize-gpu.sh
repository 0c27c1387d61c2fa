#!/usr/bin/env bash
# The optimize runs quoted in the closing notes, on a GPU machine with the staged binaries
# (../shared/scripts/device-pack.sh). Run directories go to runs/; a tarball of them and
# the logs go to $OUT (or ./gpu-out).
#   scripts/optimize-gpu.sh smoke    vector_add (4 nodes) and the softmax replay run
#   scripts/optimize-gpu.sh tuner    softmax and gemm_f32 with the tuner, --guidance tools and none
#   scripts/optimize-gpu.sh collect  tar what is there into $OUT
#   scripts/optimize-gpu.sh trust    issue 20 on two GPUs: the softmax tuner run with
#            --gpus 0,1 --guidance none --budget 100s, and one SIGKILLed after 40 s and
#            resumed; each must end with a win whose interval clears the bar or with
#            "no faster kernel" (exit 1); needs nvidia-h200-x2 (GPUS=0 runs the same on one GPU)
#   BUDGET=10m PAR=1 STRATEGY=mcts SEED=1 scripts/optimize-gpu.sh suite TASK_DIR...
#            default optimize runs (PAR at a time on the GPU), then a markdown table
#            (scripts/runs-table.py) and the run directories without profiles, in $OUT;
#            examples/bias_gelu_residual is made a task with `init` first, as its README does
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
  suite)
    shift
    budget="${BUDGET:-10m}"; strategy="${STRATEGY:-mcts}"; par="${PAR:-1}"
    for t in "$@"; do
      if [ "$t" = examples/bias_gelu_residual ]; then
        [ -f runs/tasks/bias_gelu_residual/task.toml ] || ns init runs/tasks/bias_gelu_residual \
          --from examples/bias_gelu_residual/src/fused_epilogue.cu -I examples/bias_gelu_residual/include > /dev/null
        t=runs/tasks/bias_gelu_residual
      fi
      name="$(basename "$t")-$strategy"
      ( ns optimize "$t" --budget "$budget" --seed "${SEED:-1}" --strategy "$strategy" --out "runs/$name" \
          > "runs/$name.log" 2>&1; echo "$name exit $?" >> runs/status.txt ) &
      while [ "$(jobs -r | wc -l)" -ge "$par" ]; do sleep 5; done
    done
    wait
    cat runs/status.txt
    python3 scripts/runs-table.py runs/*-"$strategy" | tee "$out/table-$strategy.md"
    tar czf "$out/runs-$strategy.tgz" --exclude='*/profile' --exclude='*.so' --exclude='*/tasks' runs
    ls -la "$out"
    exit 0
    ;;
  trust)
    gpus="${GPUS:-0,1}"
    ns optimize tasks/softmax --gpus "$gpus" --guidance none --budget 100s --out runs/softmax-2gpu \
      > runs/softmax-2gpu.log 2>&1
    echo "run on GPUs $gpus exit $?"; tail -14 runs/softmax-2gpu.log
    ns optimize tasks/softmax --gpus "$gpus" --guidance none --budget 100s --out runs/softmax-killed \
      > runs/softmax-killed.log 2>&1 &
    sleep 40; pkill -KILL -f 'out runs/softmax-killed'; wait
    ns show runs/softmax-killed | head -4
    ns optimize --resume runs/softmax-killed > runs/softmax-resumed.log 2>&1
    echo "resumed exit $?"; tail -14 runs/softmax-resumed.log
    ;;
  collect)
    cat runs/tuner-status.txt 2>/dev/null
    for f in runs/*.log; do echo "== $f"; tail -12 "$f"; done
    ;;
esac
tar czf "$out/runs.tgz" runs 2>/dev/null
ls -la "$out"
