// entry: softmax_warp_rows
// arg: x in float rows*cols
// arg: y out float rows*cols
// arg: rows int 8192
// arg: cols int 1024
// tolerance: 1e-5 1e-6
// expect: applies row-cache: `softmax_warp_kernel`: `in` kept in registers across 3 passes over `cols` (32 per thread), read once
// expect: declines cooperative
// expect: declines shuffle-reduce
#include <cuda_runtime.h>
#include <float.h>

#define WARPS_PER_BLOCK 4

// Softmax with one warp per row: the row's max, the sum of exponentials and the
// normalized values, each a pass of the warp's lanes over the row.
__global__ void softmax_warp_kernel(const float* x, float* y, int rows, int cols)
{
    const int row = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;  // whole warps leave together
    const float* in = x + row * cols;
    float* out = y + row * cols;

    float m = -FLT_MAX;
    for (int c = lane; c < cols; c += 32) m = fmaxf(m, in[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));

    float s = 0.f;
    for (int c = lane; c < cols; c += 32) s += expf(in[c] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);

    const float inv = 1.f / s;
    for (int c = lane; c < cols; c += 32) out[c] = expf(in[c] - m) * inv;
}

extern "C" void softmax_warp_rows(const float* x, float* y, int rows, int cols, cudaStream_t stream)
{
    const int blocks = (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
    softmax_warp_kernel<<<blocks, WARPS_PER_BLOCK * 32, 0, stream>>>(x, y, rows, cols);
}
