// Baseline: one float per thread, the textbook kernel.
#include <cuda_runtime.h>

#ifndef BLOCK
#define BLOCK 256
#endif

__global__ void vector_add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ c, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t stream) {
  if (n <= 0) return;
  vector_add_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, stream>>>(a, b, c, n);
}
