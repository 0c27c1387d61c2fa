// entry: embedding_bag_mean
// arg: weight in __half vocab*dim
// arg: indices in int n_indices
// arg: offsets in int bags+1
// arg: out out __half bags*dim
// arg: bags int 4096
// arg: dim int 256
// arg: vocab int 50000
// arg: n_indices int 65536
// tolerance: 1e-2 1e-3
// expect: applies vectorize: `embedding_bag_mean_kernel`: 8 elements per thread, out 16B out through registers; `i` divided once per run of 8 by `dim` (a multiple of 8) (2 site(s)); the loop over `j` runs once for the run, each step over its 8 elements; `weight` read 16B wide at the run's columns (`weight[(int64_t)row * dim + d]`)
// expect: applies read-only
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

// EmbeddingBag(mode="mean"): bag b averages the rows indices[offsets[b] .. offsets[b+1])
// of the table; an id out of range reads row 0. One thread per output element, so each
// runs its bag's loop and reads one 2-byte value of every row.
__global__ void embedding_bag_mean_kernel(const __half* weight, const int* indices, const int* offsets,
                                          __half* out, int bags, int dim, int vocab) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (int64_t)bags * dim) return;
  const int bag = (int)(i / dim);
  const int d = (int)(i % dim);
  const int begin = offsets[bag];
  const int end = offsets[bag + 1];
  float acc = 0.f;
  for (int j = begin; j < end; ++j) {
    const int raw = indices[j];
    const int row = (raw >= 0 && raw < vocab) ? raw : 0;
    acc += __half2float(weight[(int64_t)row * dim + d]);
  }
  const int count = end - begin;
  out[i] = __float2half(count > 0 ? acc / (float)count : 0.f);
}

extern "C" void embedding_bag_mean(const __half* weight, const int* indices, const int* offsets, __half* out,
                                   int bags, int dim, int vocab, int n_indices, cudaStream_t stream) {
  (void)n_indices;
  const int64_t total = (int64_t)bags * dim;
  if (total <= 0) return;
  embedding_bag_mean_kernel<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(weight, indices, offsets, out,
                                                                                 bags, dim, vocab);
}
