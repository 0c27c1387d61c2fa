#include <cuda_runtime.h>

__global__ void lookup_warp(const float* __restrict__ table, const int* __restrict__ ids, float* __restrict__ out, int tokens, int dim) {
  int t = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (t >= tokens) return;
  const float* src = table + (size_t)ids[t] * dim;
  float* dst = out + (size_t)t * dim;
  for (int d = lane; d < dim; d += 32) dst[d] = src[d];
}

extern "C" void embedding_lookup(const float* table, const int* ids, float* out, int tokens, int dim, cudaStream_t stream) {
  if (tokens <= 0) return;
  lookup_warp<<<(tokens + 7) / 8, 256, 0, stream>>>(table, ids, out, tokens, dim);
}
