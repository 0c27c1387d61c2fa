#include <cuda_runtime.h>

__global__ void lookup_kernel(const float* table, const int* ids, float* out, int tokens, int dim) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  const float* src = table + (size_t)ids[t] * dim;
  float* dst = out + (size_t)t * dim;
  for (int d = 0; d < dim; d++) dst[d] = src[d];
}

extern "C" void embedding_lookup(const float* table, const int* ids, float* out, int tokens, int dim, cudaStream_t stream) {
  if (tokens <= 0) return;
  lookup_kernel<<<(tokens + 255) / 256, 256, 0, stream>>>(table, ids, out, tokens, dim);
}
