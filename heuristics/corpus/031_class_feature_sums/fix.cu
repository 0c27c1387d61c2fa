#include <cuda_runtime.h>

__global__ void class_sums_private(const float* __restrict__ x, const int* __restrict__ labels, float* __restrict__ sums, int n) {
  __shared__ float local[320];
  for (int k = threadIdx.x; k < 320; k += blockDim.x) local[k] = 0.0f;
  __syncthreads();
  size_t total = (size_t)n * 32;
  for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < total; j += (size_t)gridDim.x * blockDim.x)
    atomicAdd(&local[labels[j / 32] * 32 + (j % 32)], x[j]);
  __syncthreads();
  for (int k = threadIdx.x; k < 320; k += blockDim.x)
    if (local[k] != 0.0f) atomicAdd(&sums[k], local[k]);
}

extern "C" void class_feature_sums(const float* x, const int* labels, float* sums, int n, cudaStream_t stream) {
  cudaMemsetAsync(sums, 0, 320 * sizeof(float), stream);
  if (n <= 0) return;
  size_t total = (size_t)n * 32;
  size_t blocks = (total + 255) / 256;
  if (blocks > 132 * 8) blocks = 132 * 8;
  class_sums_private<<<(unsigned)blocks, 256, 0, stream>>>(x, labels, sums, n);
}
