// Baseline: one block per token; each thread walks hidden columns and accumulates the
// token's top-k expert rows in float, as vLLM's first unpermute kernel did.
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif

__global__ void moe_combine_tokens(const __nv_bfloat16* __restrict__ expert_out, const int* __restrict__ row_idx,
                                   const float* __restrict__ weights, __nv_bfloat16* __restrict__ y, int topk, int H) {
  const int t = blockIdx.x;
  for (int h = threadIdx.x; h < H; h += BLOCK) {
    float acc = 0.f;
    for (int j = 0; j < topk; ++j) {
      const int row = row_idx[t * topk + j];
      acc += weights[t * topk + j] * __bfloat162float(expert_out[(size_t)row * H + h]);
    }
    y[(size_t)t * H + h] = __float2bfloat16(acc);
  }
}

extern "C" void moe_combine(const __nv_bfloat16* expert_out, const int* row_idx, const float* weights, __nv_bfloat16* y, int T,
                            int topk, int H, cudaStream_t stream) {
  if (T <= 0 || H <= 0) return;
  moe_combine_tokens<<<T, BLOCK, 0, stream>>>(expert_out, row_idx, weights, y, topk, H);
}
