#include <cuda_runtime.h>

__global__ void count_kernel(const int* labels, unsigned int* counts, int n) {
  __shared__ unsigned int local[8];
  if (threadIdx.x < 8) local[threadIdx.x] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(&local[labels[i] & 7], 1u);
  __syncthreads();
  if (threadIdx.x < 8) atomicAdd(&counts[threadIdx.x], local[threadIdx.x]);
}

extern "C" void label_counts(const int* labels, unsigned int* counts, int n, cudaStream_t stream) {
  cudaMemsetAsync(counts, 0, 8 * sizeof(unsigned int), stream);
  if (n <= 0) return;
  int blocks = (n + 255) / 256;
  if (blocks > 2048) blocks = 2048;
  count_kernel<<<blocks, 256, 0, stream>>>(labels, counts, n);
}
