// entry: scale_shift_f32
// arg: x in float n
// arg: y out float n
// arg: alpha float
// arg: beta float
// arg: n long 16777216
// tolerance: 1e-6 1e-6
// expect: applies launch-bounds: `scale_shift_kernel`: __launch_bounds__(256, NS_MIN_BLOCKS = 2)
// expect: applies block-knob: `scale_shift_kernel`: block size `threads` = 256 as `NS_BLOCK_SCALE_SHIFT_KERNEL`
// expect: applies index-width: `scale_shift_kernel`: `n`, `i` and 1 cast in 32-bit `int`
#include <cuda_runtime.h>
#include <stddef.h>

// y = alpha * x + beta over a buffer indexed with size_t. The launcher holds its block
// size in a local constant and rounds the grid up with it, as most hand-written
// launchers do.
__global__ void scale_shift_kernel(const float* x, float* y, float alpha, float beta, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = alpha * x[i] + beta;
    }
}

extern "C" void scale_shift_f32(const float* x, float* y, float alpha, float beta, long long n,
                                cudaStream_t stream)
{
    const int threads = 256;
    const unsigned blocks = (unsigned)((n + threads - 1) / threads);
    scale_shift_kernel<<<blocks, threads, 0, stream>>>(x, y, alpha, beta, n);
}
