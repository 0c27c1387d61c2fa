#!/usr/bin/env bash
# Issue 38 on a GPU machine: one task optimized through a Ray lane on a local Ray head,
# and (MODE=local) the same run on a local lane, so their bests can be compared.
#   MODE=ray   BUDGET=3m scripts/ray-gpu.sh TASK    # head with the machine's GPUs, --ray
#   MODE=local BUDGET=3m scripts/ray-gpu.sh TASK    # the same run without Ray
# Ray comes from the image, or from .device/raysite.tar.xz for a machine with no network
# and no Ray (the cp312 wheel is 79 MB, over what a device call carries), made here with:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux2014_x86_64 -d .whl ray==2.60.0 jsonschema \
#     jsonschema-specifications referencing rpds-py
#   mkdir site && (cd site && for w in ../.whl/*.whl; do unzip -qo "$w"; done &&
#     rm -rf ray/jars ray/dashboard/client/build ray/rllib && find . -name '*.map' -delete)
#   tar cJf .device/raysite.tar.xz -C site .      # 30 MB
# $OUT gets ray-MODE.tgz (the run without SASS dumps, its log, `show --json`, and on
# MODE=ray the Ray head's logs).
set -uo pipefail
task=${1:?usage: MODE=ray|local scripts/ray-gpu.sh TASK}
mode=${MODE:-ray}; budget=${BUDGET:-3m}; seed=${SEED:-1}
out="${OUT:-gpu-out}"; mkdir -p "$out" runs
name=$(basename "$task")-$mode
ns() { bash .device/gpu-run.sh nightshift "$@"; }
if [ -f .device/bin/nightshift.xz ] && [ ! -x .device/bin/nightshift ]; then
  xz -d .device/bin/nightshift.xz && chmod +x .device/bin/nightshift
fi

if [ "$mode" = ray ]; then
  if ! python3 -c 'import ray' 2>/dev/null; then
    mkdir -p /tmp/site && tar xJf .device/raysite.tar.xz -C /tmp/site || exit 3
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  python3 -c 'import ray; print("ray", ray.__version__)' || exit 3
  gpus=$(nvidia-smi -L | wc -l)
  python3 -m ray.scripts.scripts start --head --port 6379 --num-gpus "$gpus" \
    --include-dashboard=false --disable-usage-stats --object-store-memory 500000000 \
    > runs/ray-start.log 2>&1 || { cat runs/ray-start.log; exit 3; }
  ns optimize "$task" --budget "$budget" --seed "$seed" --out "runs/$name" \
    --ray 127.0.0.1:6379 --ray-verify-gpu H200 > "runs/$name.log" 2>&1
else
  ns optimize "$task" --budget "$budget" --seed "$seed" --out "runs/$name" > "runs/$name.log" 2>&1
fi
echo "$name exit $?" | tee runs/status.txt
ns show "runs/$name" --json > "runs/$name-show.json" 2>> "runs/$name.log"
tail -25 "runs/$name.log"
if [ "$mode" = ray ]; then
  python3 -m ray.scripts.scripts stop --force > /dev/null 2>&1
  mkdir -p runs/ray-logs && cp -r /tmp/ray/session_latest/logs/. runs/ray-logs/ 2>/dev/null
fi
find runs -name 'sass*.txt' -delete 2>/dev/null
tar czf "$out/ray-$mode.tgz" runs
