// Hand rewrite of paged_kv_gather for sm_90 (same signature and results as baseline.cu).
//
// The tokens of one logical block of one sequence sit contiguously in the cache (one
// physical block: block_size x heads x head_dim) and land contiguously in the output, so
// the gather is batch * cdiv(seqlen, block_size) independent memcpys of up to
// block_size * heads * head_dim elements. One CTA per (sequence, logical block):
// - the block table is read once per CTA (a broadcast load), not once per element, and
//   the (b, i) decode is one division per CTA;
// - the run is copied with the widest access both ends allow: 16 bytes when the token
//   row (heads * head_dim * 2 bytes) and all four pointers are 16-byte aligned, else 8, 4
//   or 2 bytes (the launcher picks once per call); every run starts at a multiple of the
//   row, so one width holds for the whole call;
// - K and V are copied in the same loop, four vectors of each in flight per thread, with
//   streaming (evict-first) loads and stores: nothing is read twice, and the outputs are
//   only ever written, never read.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>

namespace {

constexpr int kUnroll = 4;

template <typename Vec>
__global__ void __launch_bounds__(256) paged_kv_gather_runs(const Vec* __restrict__ k_cache,
                                                            const Vec* __restrict__ v_cache,
                                                            const int* __restrict__ block_table,
                                                            Vec* __restrict__ k_out, Vec* __restrict__ v_out,
                                                            int seqlen, int max_blocks, int block_size,
                                                            int blocks_per_seq, unsigned row_vecs) {
  const int b = blockIdx.x / blocks_per_seq;
  const int logical = blockIdx.x - b * blocks_per_seq;
  const int physical = __ldg(block_table + (size_t)b * max_blocks + logical);
  const int first = logical * block_size;
  const int tokens = min(block_size, seqlen - first);

  const size_t run = (size_t)tokens * row_vecs;  // vectors to copy, the same in K and V
  const size_t src = (size_t)physical * block_size * row_vecs;
  const size_t dst = ((size_t)b * seqlen + first) * row_vecs;
  const Vec* ks = k_cache + src;
  const Vec* vs = v_cache + src;
  Vec* ko = k_out + dst;
  Vec* vo = v_out + dst;

  const size_t step = blockDim.x;
  size_t i = threadIdx.x;
  for (; i + (kUnroll - 1) * step < run; i += kUnroll * step) {
    Vec k[kUnroll], v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      k[u] = __ldcs(ks + i + u * step);
      v[u] = __ldcs(vs + i + u * step);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      __stcs(ko + i + u * step, k[u]);
      __stcs(vo + i + u * step, v[u]);
    }
  }
  for (; i < run; i += step) {
    const Vec k = __ldcs(ks + i);
    const Vec v = __ldcs(vs + i);
    __stcs(ko + i, k);
    __stcs(vo + i, v);
  }
}

template <typename Vec>
void launch(const __half* k_cache, const __half* v_cache, const int* block_table, __half* k_out, __half* v_out,
            int batch, int seqlen, int max_blocks, int block_size, size_t row_bytes, cudaStream_t stream) {
  const unsigned row_vecs = (unsigned)(row_bytes / sizeof(Vec));
  const int blocks_per_seq = (seqlen + block_size - 1) / block_size;
  // Enough threads for one pass over a full block's run, in whole warps, at most 256.
  const size_t run = (size_t)block_size * row_vecs;
  const int threads = run >= 256 ? 256 : (int)((run + 31) / 32 * 32);
  paged_kv_gather_runs<Vec><<<(unsigned)((size_t)batch * blocks_per_seq), threads, 0, stream>>>(
      reinterpret_cast<const Vec*>(k_cache), reinterpret_cast<const Vec*>(v_cache), block_table,
      reinterpret_cast<Vec*>(k_out), reinterpret_cast<Vec*>(v_out), seqlen, max_blocks, block_size, blocks_per_seq,
      row_vecs);
}

}  // namespace

extern "C" void paged_kv_gather(const __half* k_cache, const __half* v_cache, const int* block_table, __half* k_out,
                                __half* v_out, int batch, int seqlen, int max_blocks, int block_size, int heads,
                                int head_dim, cudaStream_t stream) {
  if (batch <= 0 || seqlen <= 0 || heads <= 0 || head_dim <= 0 || block_size <= 0) return;
  const size_t row_bytes = (size_t)heads * head_dim * sizeof(__half);
  // The widest access that every run start (a multiple of the row) and every pointer allow.
  const uintptr_t bits = (uintptr_t)k_cache | (uintptr_t)v_cache | (uintptr_t)k_out | (uintptr_t)v_out | row_bytes;
  if (bits % 16 == 0) {
    launch<uint4>(k_cache, v_cache, block_table, k_out, v_out, batch, seqlen, max_blocks, block_size, row_bytes, stream);
  } else if (bits % 8 == 0) {
    launch<uint2>(k_cache, v_cache, block_table, k_out, v_out, batch, seqlen, max_blocks, block_size, row_bytes, stream);
  } else if (bits % 4 == 0) {
    launch<unsigned>(k_cache, v_cache, block_table, k_out, v_out, batch, seqlen, max_blocks, block_size, row_bytes,
                     stream);
  } else {
    launch<unsigned short>(k_cache, v_cache, block_table, k_out, v_out, batch, seqlen, max_blocks, block_size,
                           row_bytes, stream);
  }
}
