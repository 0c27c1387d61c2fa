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
#            examples/bias_gelu_residual is made a task with `init` first, as its README does.
#            With STOP_AFTER=SECONDS, runs still going then are SIGKILLed (a device call's
#            limit is 600 s, shorter than a 10-minute run and its end) and their directories
#            go to $OUT/carry-$STRATEGY.tgz, to be carried on by `resume`
#   PAR=6 scripts/optimize-gpu.sh resume CARRY.tgz
#            unpacks the run directories in CARRY.tgz (unless they are already here) and
#            carries on each unfinished one with `optimize --resume` (its search time so far
#            counts against its budget), PAR at a time; then the table and the directories
#            in $OUT/runs-resumed.tgz
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
    budget="${BUDGET:-10m}"; strategy="${STRATEGY:-mcts}"; par="${PAR:-1}"; started=$SECONDS; names=()
    for t in "$@"; do
      while [ "$(jobs -r | wc -l)" -ge "$par" ]; do sleep 5; done
      if [ "$t" = examples/bias_gelu_residual ]; then
        [ -f runs/tasks/bias_gelu_residual/task.toml ] || ns init runs/tasks/bias_gelu_residual \
          --from examples/bias_gelu_residual/src/fused_epilogue.cu -I examples/bias_gelu_residual/include > /dev/null
        t=runs/tasks/bias_gelu_residual
      fi
      name="$(basename "$t")-$strategy"; names+=("$name")
      ( ns optimize "$t" --budget "$budget" --seed "${SEED:-1}" --strategy "$strategy" --out "runs/$name" \
          > "runs/$name.log" 2>&1; echo "$name exit $?" >> runs/status.txt ) &
    done
    if [ -n "${STOP_AFTER:-}" ]; then
      while [ "$(jobs -r | wc -l)" -gt 0 ] && [ $((SECONDS - started)) -lt "$STOP_AFTER" ]; do sleep 5; done
      for name in "${names[@]}"; do pkill -KILL -f -- "--out runs/$name\$" && echo "$name stopped at $((SECONDS - started)) s"; done
      wait
      tar czf "$out/carry-$strategy.tgz" --exclude='*/profile' --exclude='*.so' runs/tasks \
        $(for name in "${names[@]}"; do echo "runs/$name runs/$name.log"; done) 2>/dev/null
      ls -la "$out"
      exit 0
    fi
    wait
    cat runs/status.txt
    python3 scripts/runs-table.py runs/*-"$strategy" | tee "$out/table-$strategy.md"
    tar czf "$out/runs-$strategy.tgz" --exclude='*/profile' --exclude='*.so' --exclude='*/tasks' runs
    ls -la "$out"
    exit 0
    ;;
  resume)
    tgz="${2:?usage: resume CARRY.tgz}"; par="${PAR:-1}"; dirs=()
    for d in $(tar tzf "$tgz" | awk -F/ 'NF > 2 && $2 != "tasks" { print $1 "/" $2 }' | sort -u); do
      [ -f "$d/events.jsonl" ] || tar xzf "$tgz" "$d" "$d.log" runs/tasks 2>/dev/null
      dirs+=("$d")
      grep -q '"event":"run-finished"' "$d/events.jsonl" && continue
      while [ "$(jobs -r | wc -l)" -ge "$par" ]; do sleep 5; done
      ( ns optimize --resume "$d" >> "$d.log" 2>&1; echo "$(basename "$d") resumed exit $?" >> runs/status.txt ) &
    done
    wait
    cat runs/status.txt
    python3 scripts/runs-table.py "${dirs[@]}" | tee "$out/table-resumed.md"
    tar czf "$out/runs-resumed.tgz" --exclude='*/profile' --exclude='*.so' \
      $(for d in "${dirs[@]}"; do echo "$d $d.log"; done)
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
