// entry: arange_i64
// arg: out out int64_t n
// arg: start long 1000000
// arg: step long 1000
// arg: n int 1048576
// tolerance: 0 0
// expect: declines read-only
// expect: declines launch-bounds: the block size of `arange_kernel` is not a compile-time constant: `threads` is computed when the launcher runs (`int threads = n >= 65536 ? 256 : 64;`)
// expect: declines block-knob: `arange_kernel` has no grid cap in its launcher, and its block size is not a compile-time constant: `threads` is computed when the launcher runs (`int threads = n >= 65536 ? 256 : 64;`)
// expect: applies vectorize
// expect: applies grid-stride
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
// expect: declines intrinsics
#include <cuda_runtime.h>
#include <stdint.h>

// torch.arange(start, start + n*step, step) into an int64 buffer.
__global__ void arange_kernel(int64_t* __restrict__ out, int64_t start, int64_t step, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = start + step * i;
    }
}

extern "C" void arange_i64(int64_t* out, int64_t start, int64_t step, int n, cudaStream_t stream)
{
    // small ranges get small blocks so that more SMs participate
    int threads = n >= 65536 ? 256 : 64;
    int blocks = (n + threads - 1) / threads;
    if (blocks < 1) blocks = 1;
    arange_kernel<<<blocks, threads, 0, stream>>>(out, start, step, n);
}
