// entry: add_position_embedding
// arg: x in float tokens*dim
// arg: positions in int64_t tokens
// arg: wpe in float max_pos*dim
// arg: out out float tokens*dim
// arg: tokens int 16384
// arg: dim int 1024
// arg: max_pos int 4096
// tolerance: 1e-6 1e-6
// expect: applies vectorize: `add_position_embedding_kernel`: 4 elements per thread, x 16B in, out 16B out through registers; `i` divided once per run of 4 by `dim` (a multiple of 4) (2 site(s)); `wpe` read 16B wide at the run's columns (`wpe[positions[t] * dim + d]`)
// expect: applies read-only
#include <cuda_runtime.h>
#include <stdint.h>

// Learned absolute position embeddings (GPT-2's wpe) added to token embeddings, with
// explicit position ids (packed sequences restart them): out[t, :] = x[t, :] +
// wpe[positions[t], :]. The table row is gathered through the ids, one float a thread.
__global__ void add_position_embedding_kernel(const float* x, const int64_t* positions, const float* wpe,
                                              float* out, int tokens, int dim) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (int64_t)tokens * dim) return;
  const int64_t t = i / dim;
  const int64_t d = i % dim;
  out[i] = x[i] + wpe[positions[t] * dim + d];
}

extern "C" void add_position_embedding(const float* x, const int64_t* positions, const float* wpe, float* out,
                                       int tokens, int dim, int max_pos, cudaStream_t stream) {
  (void)max_pos;
  const int64_t total = (int64_t)tokens * dim;
  if (total <= 0) return;
  add_position_embedding_kernel<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(x, positions, wpe, out,
                                                                                     tokens, dim);
}
