// entry: row_minmax
// arg: data in float rows*cols
// arg: row_max out float rows
// arg: row_min out float rows
// arg: rows int 8192
// arg: cols int 1024
// tolerance: 1e-6 1e-6
// expect: applies cooperative
// expect: applies unroll
// expect: applies launch-bounds
// expect: applies block-knob: `row_minmax_kernel`: block size macro `BLOCK` made a knob (`#ifndef` guard)
// expect: declines shuffle-reduce
// expect: declines fast-divmod
// expect: declines index-width
// expect: declines intrinsics
#include <cuda_runtime.h>
#include <cfloat>

#define BLOCK 128

// Per-row max and min (e.g. for per-row int8 quantization ranges).
__global__ void row_minmax_kernel(const float* data, float* row_max, float* row_min, int rows, int cols)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;

    const float* row_ptr = data + row * cols;
    float mx = -FLT_MAX;
    float mn = FLT_MAX;
    for (int j = 0; j < cols; j++) {
        float v = row_ptr[j];
        mx = fmaxf(mx, v);
        mn = fminf(mn, v);
    }
    row_max[row] = mx;
    row_min[row] = mn;
}

extern "C" void row_minmax(const float* data, float* row_max, float* row_min, int rows, int cols,
                           cudaStream_t stream)
{
    row_minmax_kernel<<<(rows + BLOCK - 1) / BLOCK, BLOCK, 0, stream>>>(data, row_max, row_min, rows, cols);
}
