#!/usr/bin/env bash
# Issue 34's sweep on a machine of several GPUs, over as many device calls as it takes:
# the default `optimize --budget $BUDGET` on each TASK_DIR, one run per GPU at a time
# (the GPUs of one host, each timing its own run alone), then scripts/vs-torch.py on the
# run's best (baseline, best, eager and torch.compile in one process on that run's GPU).
#
#   GPUS=4 DEADLINE=560 BUDGET=10m scripts/sweep-gpu.sh TASK_DIR...
#
# Every GPU takes the next unclaimed TASK_DIR in the order given. A run killed at the
# deadline (a device call's limit is 600 s, a 10-minute run is longer) is carried on with
# `optimize --resume` by the next call (its search time so far counts against its budget).
# Carrying between calls: the runs go to $OUT/sweep.tgz (or, over 15 MiB, its parts
# $OUT/sweep.tgz.part-*); copy that file (or the parts, and no sweep.tgz) to .device/
# here and carry .device again: it is unpacked before anything starts.
# A run already finished is not run again; one whose vs-torch figures exist is skipped.
# $OUT gets table.md (scripts/runs-table.py), sweep-table.md (scripts/sweep-table.py: first
# version, best, eager, torch.compile, the hand rewrite where the example has one, % of
# floor, nodes within the parent's interval),
# vs-torch.md (every vs-torch table), sweep.tgz (runs to carry on) and done.tgz (runs finished
# in this call's TASK_DIRs, without their SASS dumps).
# TASK_DIR@N runs that task with --seed N (SEED, default 1, otherwise), named NAME-seedN:
# one example under two seeds, one per GPU, says whether a result is the search's or a draw's
# (table.md names both rows by the task, and sweep-table.md's geomean counts the kernel twice).
# WAIT_GPU=G WAIT_FILE=F holds GPU G's slot until the file F exists (the GPU is busy with
# other work of the same call first).
# examples/bias_gelu_residual is made a task with `init` first, as its README does.
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out" runs
gpus="${GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}"; [ "$gpus" -ge 1 ] || gpus=1
deadline="${DEADLINE:-560}"; budget="${BUDGET:-10m}"; started=$SECONDS
ns() { bash .device/gpu-run.sh nightshift "$@"; }
# The binary travels compressed (README's "Working on nightshift"); a warm machine keeps
# only what the carried .device holds. Without a binary that runs, every run would end at
# once and be taken for finished: stop before anything starts.
[ -x .device/bin/nightshift ] || { [ -f .device/bin/nightshift.xz ] && xz -dkf .device/bin/nightshift.xz && chmod +x .device/bin/nightshift; }
if ! ns --version > /dev/null 2>&1; then
  echo "sweep-gpu.sh: .device/bin/nightshift does not run here (stage it with ../shared/scripts/device-pack.sh)" >&2
  exit 2
fi
[ -f .device/sweep.tgz ] && tar xzf .device/sweep.tgz
# A carried state over a returned file's 16 MiB comes back in parts (below).
ls .device/sweep.tgz.part-* > /dev/null 2>&1 && cat .device/sweep.tgz.part-* | tar xz
rm -rf runs/.claims && mkdir -p runs/.claims

# TASK_DIR@SEED (digits only after the last @) -> TASK_DIR, SEED, the run's name.
dir_of() { if [[ $1 =~ ^(.*)@([0-9]+)$ ]]; then echo "${BASH_REMATCH[1]}"; else echo "$1"; fi; }
seed_of() { if [[ $1 =~ @([0-9]+)$ ]]; then echo "${BASH_REMATCH[1]}"; else echo "${SEED:-1}"; fi; }
name_of() { if [[ $1 =~ ^(.*)@([0-9]+)$ ]]; then echo "$(basename "${BASH_REMATCH[1]}")-seed${BASH_REMATCH[2]}"; else basename "$1"; fi; }

task_of() {  # TASK_DIR as given -> the task directory optimize and vs-torch read
  if [ "$1" = examples/bias_gelu_residual ]; then
    [ -f runs/tasks/bias_gelu_residual/task.toml ] || ns init runs/tasks/bias_gelu_residual \
      --from examples/bias_gelu_residual/src/fused_epilogue.cu -I examples/bias_gelu_residual/include > /dev/null
    echo runs/tasks/bias_gelu_residual
  else
    echo "$1"
  fi
}

one() {  # one TASK_DIR on GPU $1, to its end: optimize (new or resumed), then vs-torch
  local gpu=$1 t name task twin=() seed
  name="$(name_of "$2")"; seed="$(seed_of "$2")"; t="$(dir_of "$2")"; task="$(task_of "$t")"
  [ -f "$t/twin.py" ] && twin=(--twin "$t/twin.py")
  export CUDA_VISIBLE_DEVICES=$gpu
  if ! grep -qs '"event":"run-finished"' "runs/$name/events.jsonl"; then
    if [ -f "runs/$name/run.json" ]; then
      echo "[$((SECONDS - started)) s] gpu $gpu: resume $name"
      ns optimize --resume "runs/$name" >> "runs/$name.log" 2>&1
    else
      echo "[$((SECONDS - started)) s] gpu $gpu: optimize $name"
      ns optimize "$task" --budget "$budget" --seed "$seed" --out "runs/$name" > "runs/$name.log" 2>&1
    fi
    echo "$name optimize exit $? on gpu $gpu at $((SECONDS - started)) s" >> runs/status.txt
  fi
  # A run that did not finish (cut at the deadline, or one that never started) is carried
  # on by the next call; vs-torch on it would mark it done without its best.
  if ! grep -qs '"event":"run-finished"' "runs/$name/events.jsonl"; then
    echo "$name: run not finished (runs/$name.log): no vs-torch yet" >> runs/status.txt
    return
  fi
  [ -f "runs/$name.vs.json" ] && return
  echo "[$((SECONDS - started)) s] gpu $gpu: vs-torch $name"
  local cand=(); [ -f "runs/$name/best.cu" ] && cand=("runs/$name")
  [ -f "$t/hand.cu" ] && cand+=("$t/hand.cu")  # the hand rewrite, timed in the same process
  vs() {  # vs-torch on the candidates given; its JSON kept only when every side passed
    python3 scripts/vs-torch.py "$task" "$@" "${twin[@]}" --json "runs/$name.vs.tmp" > "runs/$name.vs.md" 2>&1 \
      && mv "runs/$name.vs.tmp" "runs/$name.vs.json"
  }
  if ! vs "${cand[@]}" && [ -f "$t/hand.cu" ]; then
    # vs-torch stops at any side that fails: the run's figures without the hand rewrite.
    echo "$name: vs-torch with hand.cu failed, again without it" >> runs/status.txt
    mv "runs/$name.vs.md" "runs/$name.vs-hand-failed.md"
    vs "${cand[@]:0:${#cand[@]}-1}"
  fi
  echo "$name vs-torch exit $? on gpu $gpu at $((SECONDS - started)) s" >> runs/status.txt
}

slot() {  # GPU $1 takes TASK_DIRs until none is left unclaimed
  local gpu=$1 t; shift
  # A GPU lent to other work first (WAIT_GPU=1 WAIT_FILE=F): its slot starts once F exists.
  if [ "$gpu" = "${WAIT_GPU:-}" ]; then
    while [ ! -e "${WAIT_FILE:?WAIT_GPU needs WAIT_FILE}" ] && [ $((SECONDS - started)) -lt "$deadline" ]; do sleep 2; done
    # Still busy at the deadline: claim nothing, so no run starts only to be killed.
    [ -e "$WAIT_FILE" ] || return 0
  fi
  for t in "$@"; do
    mkdir "runs/.claims/$(name_of "$t")" 2>/dev/null || continue
    one "$gpu" "$t"
  done
}

# bias_gelu_residual's task is made once, before two seeds of it could make it at once.
for t in "$@"; do [ "$(dir_of "$t")" = examples/bias_gelu_residual ] && { task_of examples/bias_gelu_residual > /dev/null; break; }; done
for ((g = 0; g < gpus; g++)); do slot "$g" "$@" & done
while [ "$(jobs -r | wc -l)" -gt 0 ] && [ $((SECONDS - started)) -lt "$deadline" ]; do sleep 5; done
if [ "$(jobs -r | wc -l)" -gt 0 ]; then
  echo "deadline at $((SECONDS - started)) s: stopping what is still going"
  pkill -KILL -f 'nightshift optimize' ; pkill -KILL -f 'scripts/vs-torch.py'
  for j in $(jobs -p); do kill -KILL "$j" 2>/dev/null; done
fi
wait 2>/dev/null
cat runs/status.txt 2>/dev/null
for t in "$@"; do echo "runs/$(name_of "$t")"; done | while read -r d; do [ -f "$d/summary.json" ] && echo "$d"; done \
  | xargs -r python3 scripts/runs-table.py | tee "$out/table.md"
for t in "$@"; do echo "runs/$(name_of "$t")"; done | xargs python3 scripts/sweep-table.py | tee "$out/sweep-table.md"
for t in "$@"; do f="runs/$(name_of "$t").vs.md"; [ -f "$f" ] && { echo "## $(name_of "$t")"; cat "$f"; }; done > "$out/vs-torch.md"
# A run with its vs-torch figures is finished: it goes to done.tgz without its SASS dumps
# (the part of a run that is large), so sweep.tgz carries only what a later call resumes.
done_runs=(); for t in "$@"; do n="$(name_of "$t")"; [ -f "runs/$n.vs.json" ] && done_runs+=("runs/$n" "runs/$n".*); done
[ ${#done_runs[@]} -gt 0 ] && tar czf "$out/done.tgz" --exclude='*/profile' --exclude='*.so' --exclude='sass.txt' "${done_runs[@]}"
tar czf "$out/sweep.tgz" --exclude='*/profile' --exclude='*.so' --exclude='runs/.claims' \
  $(for d in "${done_runs[@]}"; do printf -- '--exclude=%s ' "$d"; done) runs
# A file over 16 MiB does not come back from a device call (an 18 MB state was lost so):
# parts of 15 MiB, to copy into .device/ as they are.
if [ "$(stat -c %s "$out/sweep.tgz")" -gt $((15 * 1024 * 1024)) ]; then
  split -b 15M "$out/sweep.tgz" "$out/sweep.tgz.part-" && rm "$out/sweep.tgz"
fi
ls -la "$out"
