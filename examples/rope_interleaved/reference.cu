// Trusted reference: one block per (token, head) over the query heads followed by the
// key heads, one thread per output element. Element 2i is x[2i] cos - x[2i+1] sin and
// element 2i+1 is x[2i] sin + x[2i+1] cos, computed in double and rounded to fp16 once.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void rope_interleaved_reference(const __half* q, const __half* k, const int* positions,
                                           const float* cos_cache, const float* sin_cache, __half* q_out,
                                           __half* k_out, int num_heads, int num_kv_heads, int head_dim) {
  const long long token = blockIdx.x;
  const int head = blockIdx.y;
  const bool is_q = head < num_heads;
  const __half* x = is_q ? q + (token * num_heads + head) * head_dim
                         : k + (token * num_kv_heads + (head - num_heads)) * head_dim;
  __half* y = is_q ? q_out + (token * num_heads + head) * head_dim
                   : k_out + (token * num_kv_heads + (head - num_heads)) * head_dim;
  const long long pos = positions[token];
  for (int j = threadIdx.x; j < head_dim; j += blockDim.x) {
    const int i = j / 2;
    const double c = cos_cache[pos * (head_dim / 2) + i];
    const double s = sin_cache[pos * (head_dim / 2) + i];
    const double x0 = __half2float(x[2 * i]);
    const double x1 = __half2float(x[2 * i + 1]);
    const double r = (j % 2 == 0) ? x0 * c - x1 * s : x0 * s + x1 * c;
    y[j] = __float2half_rn((float)r);
  }
}

extern "C" void rope_interleaved(const __half* q, const __half* k, const int* positions, const float* cos_cache,
                                 const float* sin_cache, __half* q_out, __half* k_out, int num_tokens,
                                 int num_heads, int num_kv_heads, int head_dim, cudaStream_t stream) {
  if (num_tokens <= 0 || num_heads + num_kv_heads <= 0 || head_dim <= 0) return;
  dim3 grid((unsigned)num_tokens, (unsigned)(num_heads + num_kv_heads));
  rope_interleaved_reference<<<grid, 128, 0, stream>>>(q, k, positions, cos_cache, sin_cache, q_out, k_out, num_heads,
                                                       num_kv_heads, head_dim);
}
