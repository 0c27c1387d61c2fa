#!/usr/bin/env bash
# Captures the second probe set (heuristics/probes/probe_kernels_2.cu) on a GPU machine
# with the same tool chain as the first set's fixtures: nvcc -O3 -arch=sm_90 -lineinfo,
# cuobjdump -sass, nvdisasm -c -g, ptxas -v, and ncu --set full (raw and details pages).
# Then builds probe_fixes_2.cu and times each probe against its prescribed fix
# (fixes.txt). Outputs go to $OUT (or ./probe-out); at most eight files.
set -uo pipefail
out="${OUT:-probe-out}"; mkdir -p "$out"
src=heuristics/probes/probe_kernels_2.cu
work=$(mktemp -d)
export PATH="/usr/local/cuda/bin:$PATH"
nvcc -O3 -arch=sm_90 -lineinfo -Xptxas -v -o "$work/probe2" "$src" > "$out/ptxas_verbose.txt" 2>&1 || { cat "$out/ptxas_verbose.txt"; exit 1; }
nvcc -O3 -arch=sm_90 -lineinfo -cubin -o "$work/probe2.cubin" "$src"
cuobjdump -sass "$work/probe2.cubin" > "$out/sass_cubin.txt"
nvdisasm -c -g "$work/probe2.cubin" > "$out/nvdisasm.txt"
cuobjdump -res-usage "$work/probe2.cubin" > "$out/res_usage.txt"
"$work/probe2"
ncu --clock-control none --set full --csv --page raw --print-units base "$work/probe2" > "$out/ncu_full_raw.csv" 2> "$work/ncu_raw.err"
ncu --clock-control none --set full --csv --page details "$work/probe2" > "$out/ncu_full_details.csv" 2> "$work/ncu_details.err"
tail -n 3 "$work/ncu_raw.err" "$work/ncu_details.err"
nvcc -O3 -arch=sm_90 -lineinfo -o "$work/fixes" heuristics/probes/probe_fixes_2.cu && "$work/fixes" > "$out/fixes.txt"
cat "$out/fixes.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/env.txt"; ncu --version | tail -1 >> "$out/env.txt"; nvcc --version | tail -2 >> "$out/env.txt"
ls -la "$out"
