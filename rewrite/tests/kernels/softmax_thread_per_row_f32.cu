// entry: softmax_rows_f32
// arg: x in float rows*cols
// arg: y out float rows*cols
// arg: rows int 4096
// arg: cols int 1024
// tolerance: 1e-5 1e-6
// expect: applies cooperative
// expect: applies unroll
// expect: applies block-knob
// expect: applies launch-bounds
// expect: applies read-only
// expect: declines vectorize
// expect: declines shuffle-reduce
// expect: declines fast-divmod
// expect: declines index-width
// expect: declines row-strip: `softmax_rows_kernel` does not read `blockIdx.y`: a 1-D grid has no rows of blocks to strip
#include <cuda_runtime.h>
#include <cfloat>

// Naive numerically-stable softmax: one thread owns one whole row.
__global__ void softmax_rows_kernel(const float* x, float* y, int rows, int cols)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;

    float m = -FLT_MAX;
    for (int j = 0; j < cols; ++j)
        m = fmaxf(m, x[row * cols + j]);

    float s = 0.0f;
    for (int j = 0; j < cols; ++j)
        s += expf(x[row * cols + j] - m);

    float inv = 1.0f / s;
    for (int j = 0; j < cols; ++j)
        y[row * cols + j] = expf(x[row * cols + j] - m) * inv;
}

extern "C" void softmax_rows_f32(const float* x, float* y, int rows, int cols, cudaStream_t stream)
{
    softmax_rows_kernel<<<(rows + 127) / 128, 128, 0, stream>>>(x, y, rows, cols);
}
