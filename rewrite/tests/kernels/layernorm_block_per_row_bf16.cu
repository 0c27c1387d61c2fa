// entry: layernorm_bf16
// arg: input in __nv_bfloat16 num_rows*hidden
// arg: weight in __nv_bfloat16 hidden
// arg: bias in __nv_bfloat16 hidden
// arg: output out __nv_bfloat16 num_rows*hidden
// arg: num_rows int 2048
// arg: hidden int 4096
// tolerance: 2e-2 2e-2
// expect: applies shuffle-reduce
// expect: applies block-knob
// expect: applies launch-bounds
// expect: applies intrinsics
// expect: declines vectorize
// expect: declines cooperative
// expect: declines grid-stride
#include <cuda_runtime.h>
#include <cuda_bf16.h>

// bf16 LayerNorm with fp32 statistics. blockDim.x must be a power of two.
__global__ void layernorm_bf16_kernel(const __nv_bfloat16* input, const __nv_bfloat16* weight,
                                      const __nv_bfloat16* bias, __nv_bfloat16* output, int hidden)
{
    __shared__ float red[256];
    const int row = blockIdx.x;
    const int t = threadIdx.x;
    const __nv_bfloat16* in_row = input + row * hidden;
    __nv_bfloat16* out_row = output + row * hidden;

    // mean
    float acc = 0.f;
    for (int k = t; k < hidden; k += blockDim.x)
        acc += __bfloat162float(in_row[k]);
    red[t] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] += red[t + s];
        __syncthreads();
    }
    const float mu = red[0] / hidden;
    __syncthreads();

    // variance
    float sq = 0.f;
    for (int k = t; k < hidden; k += blockDim.x) {
        float d = __bfloat162float(in_row[k]) - mu;
        sq += d * d;
    }
    red[t] = sq;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] += red[t + s];
        __syncthreads();
    }
    const float inv_std = 1.0f / sqrtf(red[0] / hidden + 1e-5f);

    for (int k = t; k < hidden; k += blockDim.x) {
        float v = (__bfloat162float(in_row[k]) - mu) * inv_std;
        out_row[k] = __float2bfloat16(v * __bfloat162float(weight[k]) + __bfloat162float(bias[k]));
    }
}

extern "C" void layernorm_bf16(const __nv_bfloat16* input, const __nv_bfloat16* weight, const __nv_bfloat16* bias,
                               __nv_bfloat16* output, int num_rows, int hidden, cudaStream_t stream)
{
    layernorm_bf16_kernel<<<num_rows, 256, 0, stream>>>(input, weight, bias, output, hidden);
}
