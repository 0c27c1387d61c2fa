#include <cuda_runtime.h>

__global__ void class_sums_kernel(const float* x, const int* labels, float* sums, int n) {
  size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (j >= (size_t)n * 32) return;
  size_t row = j / 32;
  int f = j % 32;
  atomicAdd(&sums[labels[row] * 32 + f], x[j]);
}

extern "C" void class_feature_sums(const float* x, const int* labels, float* sums, int n, cudaStream_t stream) {
  cudaMemsetAsync(sums, 0, 320 * sizeof(float), stream);
  if (n <= 0) return;
  size_t total = (size_t)n * 32;
  class_sums_kernel<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(x, labels, sums, n);
}
