// Rotary position embedding for fp16 query and key, interleaved (GPT-J / original LLaMA)
// convention: within each head, element pairs (x[2i], x[2i+1]) are rotated by the angle
// pos * theta_i, with cos and sin precomputed per position in fp32 tables of shape
// max_pos x head_dim/2. q is tokens x num_heads x head_dim, k is tokens x num_kv_heads x
// head_dim (grouped-query attention), both contiguous. Writes q_out and k_out.
// One thread per rotated pair; the same kernel is launched for q and for k.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#define ROPE_THREADS 128

__device__ void rotate_pair(const __half* in, __half* out, float c, float s) {
  float x0 = __half2float(in[0]);
  float x1 = __half2float(in[1]);
  out[0] = __float2half(x0 * c - x1 * s);
  out[1] = __float2half(x0 * s + x1 * c);
}

__global__ void rope_interleaved_kernel(const __half* x, const int* positions, const float* cos_cache,
                                        const float* sin_cache, __half* out, int num_tokens, int num_heads,
                                        int head_dim) {
  int half_dim = head_dim / 2;
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= num_tokens * num_heads * half_dim) return;

  int i = idx % half_dim;
  int head = (idx / half_dim) % num_heads;
  int token = idx / (half_dim * num_heads);

  int pos = positions[token];
  float c = cos_cache[pos * half_dim + i];
  float s = sin_cache[pos * half_dim + i];

  int offset = (token * num_heads + head) * head_dim + 2 * i;
  rotate_pair(x + offset, out + offset, c, s);
}

extern "C" void rope_interleaved(const __half* q, const __half* k, const int* positions, const float* cos_cache,
                                 const float* sin_cache, __half* q_out, __half* k_out, int num_tokens,
                                 int num_heads, int num_kv_heads, int head_dim, cudaStream_t stream) {
  int q_pairs = num_tokens * num_heads * (head_dim / 2);
  int k_pairs = num_tokens * num_kv_heads * (head_dim / 2);
  if (q_pairs > 0)
    rope_interleaved_kernel<<<(q_pairs + ROPE_THREADS - 1) / ROPE_THREADS, ROPE_THREADS, 0, stream>>>(
        q, positions, cos_cache, sin_cache, q_out, num_tokens, num_heads, head_dim);
  if (k_pairs > 0)
    rope_interleaved_kernel<<<(k_pairs + ROPE_THREADS - 1) / ROPE_THREADS, ROPE_THREADS, 0, stream>>>(
        k, positions, cos_cache, sin_cache, k_out, num_tokens, num_kv_heads, head_dim);
}
