// entry: gelu_tanh_f16
// arg: x in half n
// arg: y out half n
// arg: n int 2097152
// tolerance: 2e-2 2e-2
// expect: declines launch-bounds
// expect: applies intrinsics
// expect: applies vectorize
// expect: applies grid-stride
// expect: applies read-only
// expect: declines unroll
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines fast-divmod
// expect: declines index-width
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float gelu_tanh_approx(float x)
{
    float inner = 0.79788456f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(inner));
}

__global__ void __launch_bounds__(256) gelu_tanh_f16_kernel(const __half* x, __half* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = __float2half(gelu_tanh_approx(__half2float(x[i])));
    }
}

extern "C" void gelu_tanh_f16(const __half* x, __half* y, int n, cudaStream_t stream)
{
    gelu_tanh_f16_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
}
