// entry: rope_neox_bf16
// arg: q inout __nv_bfloat16 tokens*heads*2*half_dim
// arg: tokens int 2048
// arg: heads int 32
// arg: half_dim int 64
// tolerance: 2e-2 2e-2
// expect: applies intrinsics
// expect: applies fast-divmod
// expect: applies read-only
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
#include <cuda_runtime.h>
#include <cuda_bf16.h>

// Rotary embedding, NeoX "rotate half" layout: element j pairs with j + half_dim.
// Frequencies are computed on the fly; the position is the token index.
__global__ void rope_neox_kernel(__nv_bfloat16* q, int tokens, int heads, int half_dim)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= tokens * heads * half_dim) return;

    int j = idx % half_dim;
    int head_row = idx / half_dim;          // token * heads + head
    int pos = head_row / heads;

    float inv_freq = powf(10000.0f, -(float)(2 * j) / (float)(2 * half_dim));
    float theta = (float)pos * inv_freq;
    float c = cosf(theta);
    float s = sinf(theta);

    __nv_bfloat16* v = q + head_row * (2 * half_dim);
    float a = __bfloat162float(v[j]);
    float b = __bfloat162float(v[j + half_dim]);
    v[j] = __float2bfloat16(a * c - b * s);
    v[j + half_dim] = __float2bfloat16(b * c + a * s);
}

extern "C" void rope_neox_bf16(__nv_bfloat16* q, int tokens, int heads, int half_dim, cudaStream_t stream)
{
    int work = tokens * heads * half_dim;
    rope_neox_kernel<<<(work + 127) / 128, 128, 0, stream>>>(q, tokens, heads, half_dim);
}
