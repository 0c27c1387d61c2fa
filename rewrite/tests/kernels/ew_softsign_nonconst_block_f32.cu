// entry: softsign_f32
// arg: x in float n
// arg: y out float n
// arg: n long 16777216
// tolerance: 1e-6 1e-6
// expect: declines launch-bounds: the block size of `softsign_kernel` is not a compile-time constant: `threads` is a variable, not a constant (`int threads = 256;` has no `const`)
// expect: declines block-knob: `softsign_kernel` has no grid cap in its launcher, and its block size is not a compile-time constant: `threads` is a variable, not a constant (`int threads = 256;` has no `const`)
// expect: applies index-width: `softsign_kernel`: `n`, `i` and 1 cast in 32-bit `int`
#include <cuda_runtime.h>

// The launch shape comes from a variable block size (no const) and a helper that
// returns the grid as a dim3, held in an `auto`.
static dim3 blocks_for(long long n, int threads)
{
    return dim3((unsigned)((n + threads - 1) / threads));
}

__global__ void softsign_kernel(const float* x, float* y, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = v / (1.0f + fabsf(v));
    }
}

extern "C" void softsign_f32(const float* x, float* y, long long n, cudaStream_t stream)
{
    int threads = 256;
    auto grid = blocks_for(n, threads);
    softsign_kernel<<<grid, threads, 0, stream>>>(x, y, n);
}
