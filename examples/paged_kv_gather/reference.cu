// Trusted reference: one block per gathered token (b, t). The token's physical block is
// looked up once, then the block's threads copy the token's heads * head_dim values of K
// and of V element by element.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stddef.h>

__global__ void paged_kv_gather_reference(const __half* k_cache, const __half* v_cache, const int* block_table,
                                          __half* k_out, __half* v_out, int seqlen, int max_blocks, int block_size,
                                          size_t row) {
  const size_t token = blockIdx.x;  // b * seqlen + t
  const size_t b = token / seqlen, t = token % seqlen;
  const size_t physical = (size_t)block_table[b * max_blocks + t / block_size];
  const size_t src = (physical * block_size + t % block_size) * row;
  const size_t dst = token * row;
  for (size_t e = threadIdx.x; e < row; e += blockDim.x) {
    k_out[dst + e] = k_cache[src + e];
    v_out[dst + e] = v_cache[src + e];
  }
}

extern "C" void paged_kv_gather(const __half* k_cache, const __half* v_cache, const int* block_table, __half* k_out,
                                __half* v_out, int batch, int seqlen, int max_blocks, int block_size, int heads,
                                int head_dim, cudaStream_t stream) {
  if (batch <= 0 || seqlen <= 0 || heads <= 0 || head_dim <= 0) return;
  const size_t row = (size_t)heads * head_dim;
  paged_kv_gather_reference<<<(unsigned)((size_t)batch * seqlen), 128, 0, stream>>>(
      k_cache, v_cache, block_table, k_out, v_out, seqlen, max_blocks, block_size, row);
}
