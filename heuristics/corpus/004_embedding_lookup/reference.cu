#include <cuda_runtime.h>

__global__ void lookup_reference(const float* table, const int* ids, float* out, int tokens, int dim) {
  size_t total = (size_t)tokens * dim;
  for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < total; j += (size_t)gridDim.x * blockDim.x) {
    size_t t = j / dim, d = j % dim;
    out[j] = table[(size_t)ids[t] * dim + d];
  }
}

extern "C" void embedding_lookup(const float* table, const int* ids, float* out, int tokens, int dim, cudaStream_t stream) {
  if (tokens <= 0) return;
  lookup_reference<<<1024, 256, 0, stream>>>(table, ids, out, tokens, dim);
}
