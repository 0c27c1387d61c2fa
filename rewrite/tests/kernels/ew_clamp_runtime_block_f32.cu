// entry: clamp_f32
// arg: src in float n
// arg: dst out float n
// arg: lo float
// arg: hi float
// arg: n int 1048576
// tolerance: 0 0
// expect: declines launch-bounds: the block size of `clamp_kernel` is not a compile-time constant: `threads` is computed when the launcher runs (`int threads = (n < 4096) ? 128 : 256;`)
// expect: declines block-knob: `clamp_kernel` has no grid cap in its launcher, and its block size is not a compile-time constant: `threads` is computed when the launcher runs (`int threads = (n < 4096) ? 128 : 256;`)
// expect: applies vectorize
// expect: applies grid-stride
// expect: applies read-only
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
// expect: declines intrinsics
// expect: declines index-width
#include <cuda_runtime.h>

__global__ void clamp_kernel(const float* src, float* dst, float lo, float hi, int n)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    dst[idx] = fminf(fmaxf(src[idx], lo), hi);
}

extern "C" void clamp_f32(const float* src, float* dst, float lo, float hi, int n, cudaStream_t stream)
{
    // block size picked at run time from the problem size
    int threads = (n < 4096) ? 128 : 256;
    int blocks = (n + threads - 1) / threads;
    if (blocks < 1) blocks = 1;
    clamp_kernel<<<blocks, threads, 0, stream>>>(src, dst, lo, hi, n);
}
