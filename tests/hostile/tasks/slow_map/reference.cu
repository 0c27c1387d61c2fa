// Trusted reference: the baseline's own computation, done three times over (identical
// results, three times the time: a slow but obviously right reference).
#include <cuda_runtime.h>

__global__ void slow_map_reference(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
#pragma unroll 1
  for (int k = 0; k < 4096; ++k) v = fmaf(v, 0.999f, 0.001f * __sinf(v));
  y[i] = v;
}

extern "C" void slow_map(const float* x, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  for (int pass = 0; pass < 3; ++pass) slow_map_reference<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
}
