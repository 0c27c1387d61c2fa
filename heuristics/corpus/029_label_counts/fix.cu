#include <cuda_runtime.h>

__global__ void count_aggregated(const int* __restrict__ labels, unsigned int* __restrict__ counts, int n) {
  __shared__ unsigned int local[8];
  if (threadIdx.x < 8) local[threadIdx.x] = 0;
  __syncthreads();
  int lane = threadIdx.x % 32;
  // Whole warps run the loop together so the match covers every active lane.
  int stride = gridDim.x * blockDim.x;
  int start = blockIdx.x * blockDim.x + threadIdx.x;
  int trips = (n - (start - lane) + stride - 1) / stride;
  for (int t = 0; t < trips; t++) {
    int i = start + t * stride;
    bool valid = i < n;
    int label = valid ? (labels[i] & 7) : -1;
    unsigned int peers = __match_any_sync(0xffffffffu, label);
    if (valid && lane == __ffs(peers) - 1) atomicAdd(&local[label], (unsigned int)__popc(peers));
  }
  __syncthreads();
  if (threadIdx.x < 8) atomicAdd(&counts[threadIdx.x], local[threadIdx.x]);
}

extern "C" void label_counts(const int* labels, unsigned int* counts, int n, cudaStream_t stream) {
  cudaMemsetAsync(counts, 0, 8 * sizeof(unsigned int), stream);
  if (n <= 0) return;
  int blocks = (n + 255) / 256;
  if (blocks > 2048) blocks = 2048;
  count_aggregated<<<blocks, 256, 0, stream>>>(labels, counts, n);
}
