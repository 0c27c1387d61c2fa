// entry: nchw_bias_gelu_bf16
// arg: in in __nv_bfloat16 batch*channels*height*width
// arg: bias in __nv_bfloat16 channels
// arg: out out __nv_bfloat16 batch*channels*height*width
// arg: batch int 8
// arg: channels int 256
// arg: height int 32
// arg: width int 32
// tolerance: 2e-2 2e-2
// expect: applies index-width
// expect: applies fast-divmod
// expect: applies intrinsics
// expect: applies vectorize
// expect: applies grid-stride
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

// tanh approximation of GELU (as used by GPT-2 style models)
__device__ __forceinline__ float gelu_tanh(float x)
{
    const float k0 = 0.7978845608028654f;  // sqrt(2/pi)
    const float k1 = 0.044715f;
    return 0.5f * x * (1.0f + tanhf(k0 * (x + k1 * x * x * x)));
}

__global__ void nchw_bias_gelu_kernel(const __nv_bfloat16* __restrict__ in,
                                      const __nv_bfloat16* __restrict__ bias,
                                      __nv_bfloat16* __restrict__ out,
                                      int64_t total, int64_t hw, int channels)
{
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    int c = (int)((idx / hw) % channels);
    float v = __bfloat162float(in[idx]) + __bfloat162float(bias[c]);
    out[idx] = __float2bfloat16(gelu_tanh(v));
}

extern "C" void nchw_bias_gelu_bf16(const __nv_bfloat16* in, const __nv_bfloat16* bias, __nv_bfloat16* out,
                                    int batch, int channels, int height, int width, cudaStream_t stream)
{
    int64_t hw = (int64_t)height * width;
    int64_t total = (int64_t)batch * channels * hw;
    unsigned int grid = (unsigned int)((total + 255) / 256);
    nchw_bias_gelu_kernel<<<grid, 256, 0, stream>>>(in, bias, out, total, hw, channels);
}
