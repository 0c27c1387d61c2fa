#include <cuda_runtime.h>

__global__ void histogram_kernel(const float* x, unsigned int* bins, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    atomicAdd(&bins[min(max((int)(v * 64.0f), 0), 63)], 1u);
  }
}

extern "C" void value_histogram(const float* x, unsigned int* bins, int n, cudaStream_t stream) {
  cudaMemsetAsync(bins, 0, 64 * sizeof(unsigned int), stream);
  if (n <= 0) return;
  histogram_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, bins, n);
}
