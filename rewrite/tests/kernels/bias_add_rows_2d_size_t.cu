// entry: bias_add_rows
// arg: x in float rows*cols
// arg: b in float cols
// arg: y out float rows*cols
// arg: rows int 4096
// arg: cols int 4096
// tolerance: 1e-6 1e-6
// expect: applies index-width
// expect: applies read-only
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines fast-divmod
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
// expect: declines intrinsics
// expect: applies row-strip
#include <cuda_runtime.h>

// 2-D launch: blockIdx.y picks the row, x-threads walk the columns.
__global__ void bias_add_rows_kernel(const float* x, const float* b, float* y, int rows, int cols)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y;
    if (col < cols && row < rows) {
        size_t off = (size_t)row * cols + col;
        y[off] = x[off] + b[col];
    }
}

extern "C" void bias_add_rows(const float* x, const float* b, float* y, int rows, int cols, cudaStream_t stream)
{
    dim3 grid((cols + 255) / 256, rows);
    bias_add_rows_kernel<<<grid, 256, 0, stream>>>(x, b, y, rows, cols);
}
