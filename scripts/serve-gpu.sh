#!/usr/bin/env bash
# Issue 37 on a machine of several GPUs: for each EXAMPLE (one per GPU, in parallel),
#   1. the example as it ships (one bench size): `optimize --budget $BUDGET`;
#   2. that run's best judged on the served task (the example with a decode shape of
#      VAR = 8 at 80% of the calls and its bench size as prefill at 20%): per-shape table;
#   3. `optimize --budget $BUDGET` on the served task.
#   BUDGET=3m scripts/serve-gpu.sh EXAMPLE:VAR[:SEED]...   (one GPU each, in order)
# On a machine of one GPU (or with SEQUENTIAL=1) the examples run one after another on
# GPU 0, so no two timings share a GPU.
# SINGLE=0 leaves out steps 1 and 2, SERVED=0 step 3; a SEED other than 1 names the runs NAME-sSEED-*.
# $OUT gets serve.tgz (the runs, no SASS dumps, and every eval's JSON and text).
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out" runs/tasks
budget="${BUDGET:-3m}"; started=$SECONDS
ns() { bash .device/gpu-run.sh nightshift "$@"; }

served_task() {  # EXAMPLE VAR NAME -> runs/tasks/NAME-served with decode and prefill shapes
  local name=$3
  rm -rf "runs/tasks/$name-served"; cp -r "$1" "runs/tasks/$name-served"
  sed -i "s/^\[sizes\]$/[sizes]\n# Served: decode ($2 = 8) is 80% of the calls, the bench size (prefill) 20%.\nserve = [{ name = \"decode\", $2 = 8, weight = 0.8 }, { name = \"prefill\", weight = 0.2 }]\nserve_weights = \"calls\"/" \
    "runs/tasks/$name-served/task.toml"
  echo "runs/tasks/$name-served"
}

one() {  # GPU EXAMPLE:VAR[:SEED]
  local gpu=$1 ex var seed name served
  IFS=: read -r ex var seed <<< "$2"; seed=${seed:-1}
  name=$(basename "$ex"); export CUDA_VISIBLE_DEVICES=$gpu
  [ "$seed" = 1 ] || name="$name-s$seed"
  served=$(served_task "$ex" "$var" "$name")
  [ "${SINGLE:-1}" = 0 ] || single "$gpu" "$ex" "$name" "$seed" "$served"
  [ "${SERVED:-1}" = 0 ] && return
  echo "[$((SECONDS - started)) s] gpu $gpu: served $name"
  ns optimize "$served" --budget "$budget" --seed "$seed" --out "runs/$name-served" > "runs/$name-served.log" 2>&1
  echo "$name served exit $? at $((SECONDS - started)) s" >> runs/status.txt
}

single() {  # GPU EXAMPLE NAME SEED SERVED-TASK
  local gpu=$1 ex=$2 name=$3 seed=$4 served=$5
  echo "[$((SECONDS - started)) s] gpu $gpu: single-shape $name"
  ns optimize "$ex" --budget "$budget" --seed "$seed" --out "runs/$name-single" > "runs/$name-single.log" 2>&1
  echo "$name single exit $? at $((SECONDS - started)) s" >> runs/status.txt
  if [ -f "runs/$name-single/best.cu" ]; then
    cp "runs/$name-single/best.cu" "runs/$name-single-best.cu"
    # The single-shape best keeps its build options (knobs, flags) where it has any.
    local defs=() flags=()
    if [ -f "runs/$name-single/best.json" ]; then
      mapfile -t defs < <(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])).get("candidate") or {}; [print("-D\n"+k+"="+str(v)) for k,v in (c.get("defines") or {}).items()]' "runs/$name-single/best.json")
      mapfile -t flags < <(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])).get("candidate") or {}; [print("--nvcc-flag="+f) for f in (c.get("flags") or [])]' "runs/$name-single/best.json")
    fi
    echo "single best defines: ${defs[*]} flags: ${flags[*]}" > "runs/$name-single-eval.txt"
    ns eval "$served" "runs/$name-single-best.cu" "${defs[@]}" "${flags[@]}" --json > "runs/$name-single-eval.json" 2>> "runs/$name-single-eval.txt"
    ns eval "$served" "runs/$name-single-best.cu" "${defs[@]}" "${flags[@]}" >> "runs/$name-single-eval.txt" 2>&1
  fi
}

deadline="${DEADLINE:-560}"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "${SEQUENTIAL:-0}" = 1 ] || [ "$gpus" -le 1 ]; then
  ( for a in "$@"; do one 0 "$a"; done ) &
else
  g=0
  for a in "$@"; do one "$g" "$a" & g=$((g + 1)); done
fi
while [ "$(jobs -r | wc -l)" -gt 0 ] && [ $((SECONDS - started)) -lt "$deadline" ]; do sleep 5; done
if [ "$(jobs -r | wc -l)" -gt 0 ]; then
  echo "deadline at $((SECONDS - started)) s: stopping what is still going (optimize --resume carries on)"
  pkill -INT -f 'nightshift optimize'; sleep 15; pkill -KILL -f 'nightshift'
fi
wait 2>/dev/null
cat runs/status.txt
find runs -name 'sass*.txt' -delete 2>/dev/null
tar czf "$out/serve.tgz" runs
