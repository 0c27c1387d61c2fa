// Input embedding of a multi-codebook audio language model (MusicGen-style): each frame
// carries K codes from a residual vector quantizer, one per codebook, and the model input
// is the sum of the K codebook embeddings:
//   out[b, s, :] = sum_k tables[k, codes[b, k, s], :]
// codes is B x K x S (int64, as the tokenizer hands it over), tables is K x V x D bf16,
// out is B x S x D bf16. One thread per output element, fp32 accumulation.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

__global__ void codebook_embed_sum_kernel(const int64_t* codes, const __nv_bfloat16* tables, __nv_bfloat16* out,
                                          int64_t B, int64_t K, int64_t S, int64_t V, int64_t D) {
  int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= B * S * D) return;
  int64_t d = idx % D;
  int64_t s = (idx / D) % S;
  int64_t b = idx / (S * D);

  float acc = 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    int64_t code = codes[(b * K + k) * S + s];
    acc += __bfloat162float(tables[(k * V + code) * D + d]);
  }
  out[idx] = __float2bfloat16(acc);
}

extern "C" void codebook_embed_sum(const int64_t* codes, const __nv_bfloat16* tables, __nv_bfloat16* out, int64_t B,
                                   int64_t K, int64_t S, int64_t V, int64_t D, cudaStream_t stream) {
  int64_t total = B * S * D;
  if (total <= 0) return;
  int64_t blocks = (total + 255) / 256;
  codebook_embed_sum_kernel<<<(unsigned)blocks, 256, 0, stream>>>(codes, tables, out, B, K, S, V, D);
}
