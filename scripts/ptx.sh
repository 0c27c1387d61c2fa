#!/usr/bin/env bash
# Regenerates the judge kernels' PTX (src/wall/gpu/kernels/*.ptx), committed so that the
# build needs no CUDA toolkit: the driver JIT-compiles it for whatever GPU it finds.
# Uses the pinned CUDA 13.0 wheel in .cuda/ (installed by .ci/run), so that the committed
# text is reproducible; tests/judge_kernels.rs runs this into a temporary folder and
# compares. Usage: scripts/ptx.sh [OUT_DIR]   (default: next to the sources)
#
# compute_75: the oldest target CUDA 13 compiles, so one image serves Turing on; the f16
# and bf16 conversions are integer code, needing nothing newer. --fmad=false: every
# multiply and add is rounded on its own (mul.rn/add.rn), so neither nvcc nor the driver's
# JIT may fuse them: the comparison's tolerance is then the host's, bit for bit, and a
# generated set is the same bits in the generator and its check. No -lineinfo, no -rdc.
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc=$(ls .cuda/lib/python3*/site-packages/nvidia/cu13/bin/nvcc 2>/dev/null | head -1 || true)
if [ -z "$nvcc" ]; then
  echo "no wheel nvcc under .cuda/: run .ci/run once to install the CUDA 13.0 wheels" >&2
  exit 2
fi
src=src/wall/gpu/kernels
out="${1:-$src}"
mkdir -p "$out"
for kernel in generate compare; do
  "$nvcc" -ptx -arch=compute_75 -O3 --fmad=false -o "$out/$kernel.ptx" "$src/$kernel.cu"
done
