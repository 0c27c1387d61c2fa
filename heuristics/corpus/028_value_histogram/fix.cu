#include <cuda_runtime.h>

__global__ void histogram_private(const float* __restrict__ x, unsigned int* __restrict__ bins, int n) {
  __shared__ unsigned int local[64];
  if (threadIdx.x < 64) local[threadIdx.x] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float v = x[i];
    atomicAdd(&local[min(max((int)(v * 64.0f), 0), 63)], 1u);
  }
  __syncthreads();
  if (threadIdx.x < 64 && local[threadIdx.x]) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}

extern "C" void value_histogram(const float* x, unsigned int* bins, int n, cudaStream_t stream) {
  cudaMemsetAsync(bins, 0, 64 * sizeof(unsigned int), stream);
  if (n <= 0) return;
  int blocks = (n + 255) / 256;
  if (blocks > 132 * 8) blocks = 132 * 8;
  histogram_private<<<blocks, 256, 0, stream>>>(x, bins, n);
}
