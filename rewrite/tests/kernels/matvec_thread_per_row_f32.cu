// entry: gemv_f32
// arg: A in float rows*cols
// arg: x in float cols
// arg: y out float rows
// arg: rows int 4096
// arg: cols int 4096
// tolerance: 1e-4 1e-4
// expect: applies cooperative
// expect: applies unroll
// expect: applies read-only
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines shuffle-reduce
// expect: declines fast-divmod
// expect: declines index-width
// expect: declines intrinsics
// expect: declines vectorize
// expect: applies coarsen
#include <cuda_runtime.h>

// y = A x for a row-major A; each thread computes one dot product.
__global__ void gemv_rowmajor(const float* A, const float* x, float* y, int rows, int cols)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    float acc = 0.0f;
    for (int j = 0; j < cols; ++j)
        acc += A[row * cols + j] * x[j];
    y[row] = acc;
}

extern "C" void gemv_f32(const float* A, const float* x, float* y, int rows, int cols, cudaStream_t stream)
{
    gemv_rowmajor<<<(rows + 255) / 256, 256, 0, stream>>>(A, x, y, rows, cols);
}
