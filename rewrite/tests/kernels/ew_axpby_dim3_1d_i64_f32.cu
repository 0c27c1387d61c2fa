// entry: axpby_f32
// arg: x in float n
// arg: y inout float n
// arg: a float
// arg: b float
// arg: n long 16777216
// tolerance: 1e-6 1e-6
// expect: applies launch-bounds: `axpby_kernel`: __launch_bounds__(256, NS_MIN_BLOCKS = 2)
// expect: applies block-knob: `axpby_kernel`: block size 256 as `NS_BLOCK_AXPBY_KERNEL`
// expect: applies index-width: `axpby_kernel`: `n`, `i` and 1 cast in 32-bit `int`
#include <cuda_runtime.h>
#include <stdint.h>

// y = a * x + b * y with 64-bit indices, launched with one-dimensional dim3s.
__global__ void axpby_kernel(const float* x, float* y, float a, float b, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + b * y[i];
    }
}

extern "C" void axpby_f32(const float* x, float* y, float a, float b, int64_t n, cudaStream_t stream)
{
    dim3 block(256);
    dim3 grid((unsigned)((n + 255) / 256));
    axpby_kernel<<<grid, block, 0, stream>>>(x, y, a, b, n);
}
