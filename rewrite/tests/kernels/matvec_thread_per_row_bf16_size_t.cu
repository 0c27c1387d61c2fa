// entry: linear_gemv_bf16
// arg: W in __nv_bfloat16 out_features*in_features
// arg: x in __nv_bfloat16 in_features
// arg: bias in float out_features
// arg: y out __nv_bfloat16 out_features
// arg: out_features int 4096
// arg: in_features int 4096
// tolerance: 2e-2 2e-2
// expect: applies cooperative
// expect: applies index-width
// expect: applies unroll
// expect: applies read-only
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines shuffle-reduce
// expect: declines fast-divmod
// expect: declines intrinsics
#include <cuda_runtime.h>
#include <cuda_bf16.h>

// Decode-time linear layer (batch 1): y = W x + b, W is [out_features, in_features].
__global__ void linear_gemv_bf16_kernel(const __nv_bfloat16* W, const __nv_bfloat16* x, const float* bias,
                                        __nv_bfloat16* y, int out_features, int in_features)
{
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= out_features) return;

    size_t base = (size_t)o * in_features;
    float acc = 0.0f;
    for (int k = 0; k < in_features; ++k) {
        acc += __bfloat162float(W[base + k]) * __bfloat162float(x[k]);
    }
    y[o] = __float2bfloat16(acc + bias[o]);
}

extern "C" void linear_gemv_bf16(const __nv_bfloat16* W, const __nv_bfloat16* x, const float* bias,
                                 __nv_bfloat16* y, int out_features, int in_features, cudaStream_t stream)
{
    linear_gemv_bf16_kernel<<<(out_features + 255) / 256, 256, 0, stream>>>(W, x, bias, y, out_features,
                                                                           in_features);
}
