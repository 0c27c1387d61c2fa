// entry: softplus_f32
// arg: x in float n
// arg: y out float n
// arg: n int 1048576
// tolerance: 1e-6 1e-6
// expect: declines intrinsics
// expect: applies index-width
// expect: applies vectorize
// expect: applies grid-stride
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
// expect: declines fast-divmod
#include <cuda_runtime.h>

// softplus(x) = log(1 + exp(x)), linear above the threshold like torch.
__device__ float softplus(float v)
{
    return v > 20.0f ? v : logf(1.0f + expf(v));
}

__global__ void softplus_kernel(const float* x, float* y, int n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = softplus(x[i]);
    }
}

extern "C" void softplus_f32(const float* x, float* y, int n, cudaStream_t stream)
{
    softplus_kernel<<<(n + 1023) / 1024, 1024, 0, stream>>>(x, y, n);
}
