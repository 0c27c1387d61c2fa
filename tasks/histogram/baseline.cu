// Baseline: the textbook privatized histogram. Each block counts into 256 bins in shared
// memory (shared atomics), then adds its bins to the global histogram.
#include <cuda_runtime.h>

#ifndef BLOCK
#define BLOCK 256
#endif

__global__ void histogram_blocks(const unsigned char* __restrict__ data, unsigned int* __restrict__ bins, int n) {
  __shared__ unsigned int local[256];
  for (int b = threadIdx.x; b < 256; b += BLOCK) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += BLOCK)
    if (local[b]) atomicAdd(&bins[b], local[b]);
}

extern "C" void histogram(const unsigned char* data, unsigned int* bins, int n, cudaStream_t stream) {
  cudaMemsetAsync(bins, 0, 256 * sizeof(unsigned int), stream);
  if (n <= 0) return;
  int blocks = (n + BLOCK - 1) / BLOCK;
  if (blocks > 1056) blocks = 1056;
  histogram_blocks<<<blocks, BLOCK, 0, stream>>>(data, bins, n);
}
