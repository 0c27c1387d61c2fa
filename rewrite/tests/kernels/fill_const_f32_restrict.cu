// entry: fill_f32
// arg: out out float n
// arg: value float
// arg: n int 4194304
// tolerance: 0 0
// expect: declines read-only
// expect: applies vectorize
// expect: applies grid-stride
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines unroll
// expect: declines intrinsics
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines fast-divmod
// expect: declines index-width
#include <cuda_runtime.h>

// torch.full_like: write a constant into every element.
__global__ void fill_kernel(float* __restrict__ out, float value, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = value;
}

extern "C" void fill_f32(float* out, float value, int n, cudaStream_t stream)
{
    fill_kernel<<<(n + 1023) / 1024, 1024, 0, stream>>>(out, value, n);
}
