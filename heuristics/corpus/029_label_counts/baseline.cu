#include <cuda_runtime.h>

__global__ void count_kernel(const unsigned char* labels, unsigned int* counts, int n) {
  __shared__ unsigned int local[8];
  if (threadIdx.x < 8) local[threadIdx.x] = 0;
  __syncthreads();
  int stride = gridDim.x * blockDim.x;
  int words = n / 4;
  const uchar4* packed = reinterpret_cast<const uchar4*>(labels);
  for (int w = blockIdx.x * blockDim.x + threadIdx.x; w < words; w += stride) {
    uchar4 l = packed[w];
    atomicAdd(&local[l.x & 7], 1u);
    atomicAdd(&local[l.y & 7], 1u);
    atomicAdd(&local[l.z & 7], 1u);
    atomicAdd(&local[l.w & 7], 1u);
  }
  for (int i = 4 * words + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) atomicAdd(&local[labels[i] & 7], 1u);
  __syncthreads();
  if (threadIdx.x < 8) atomicAdd(&counts[threadIdx.x], local[threadIdx.x]);
}

extern "C" void label_counts(const unsigned char* labels, unsigned int* counts, int n, cudaStream_t stream) {
  cudaMemsetAsync(counts, 0, 8 * sizeof(unsigned int), stream);
  if (n <= 0) return;
  int blocks = (n / 4 + 255) / 256;
  if (blocks < 1) blocks = 1;
  if (blocks > 2048) blocks = 2048;
  count_kernel<<<blocks, 256, 0, stream>>>(labels, counts, n);
}
