// entry: column_sum
// arg: m in float rows*cols
// arg: out out float cols
// arg: rows int 2048
// arg: cols int 4096
// tolerance: 1e-4 1e-4
// expect: applies unroll
// expect: applies read-only
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines shuffle-reduce
// expect: declines fast-divmod
// expect: declines intrinsics
#include <cuda_runtime.h>

// Sum over rows for each column (bias-gradient style). Neighbouring threads
// read neighbouring columns, so every iteration is coalesced across the warp.
__global__ void column_sum_kernel(const float* m, float* out, int rows, int cols)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    float acc = 0.0f;
    for (int r = 0; r < rows; ++r) {
        acc += m[r * cols + col];
    }
    out[col] = acc;
}

extern "C" void column_sum(const float* m, float* out, int rows, int cols, cudaStream_t stream)
{
    column_sum_kernel<<<(cols + 127) / 128, 128, 0, stream>>>(m, out, rows, cols);
}
