// Gather a paged KV cache into contiguous K and V (the preprocessing before a dense
// attention kernel, or before handing a prefix to another worker): the cache pools hold
// fixed-size blocks of block_size tokens, num_blocks x block_size x heads x head_dim fp16,
// and block_table[b, i] names the physical block that holds logical block i of sequence b.
//   k_out[b, t, h, d] = k_cache[block_table[b, t / block_size], t % block_size, h, d]
//   v_out[b, t, h, d] = v_cache[block_table[b, t / block_size], t % block_size, h, d]
// for t < seqlen. One thread per output element; it copies that element of K and of V.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

__global__ void paged_kv_gather_kernel(const __half* k_cache, const __half* v_cache, const int* block_table,
                                       __half* k_out, __half* v_out, int batch, int seqlen, int max_blocks,
                                       int block_size, int heads, int head_dim) {
  const int64_t row = (int64_t)heads * head_dim;  // elements per token
  const int64_t total = (int64_t)batch * seqlen * row;
  const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= total) return;

  const int64_t token = idx / row;  // b * seqlen + t
  const int64_t e = idx % row;      // h * head_dim + d
  const int b = (int)(token / seqlen);
  const int t = (int)(token % seqlen);
  const int physical = block_table[b * max_blocks + t / block_size];
  const int64_t src = ((int64_t)physical * block_size + t % block_size) * row + e;

  k_out[idx] = k_cache[src];
  v_out[idx] = v_cache[src];
}

extern "C" void paged_kv_gather(const __half* k_cache, const __half* v_cache, const int* block_table, __half* k_out,
                                __half* v_out, int batch, int seqlen, int max_blocks, int block_size, int heads,
                                int head_dim, cudaStream_t stream) {
  const int64_t total = (int64_t)batch * seqlen * heads * head_dim;
  if (total <= 0) return;
  const int threads = 256;
  const int64_t blocks = (total + threads - 1) / threads;
  paged_kv_gather_kernel<<<(unsigned)blocks, threads, 0, stream>>>(k_cache, v_cache, block_table, k_out, v_out,
                                                                    batch, seqlen, max_blocks, block_size, heads,
                                                                    head_dim);
}
