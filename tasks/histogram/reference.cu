// Trusted reference: one thread per bin counts its byte value over the whole input.
// Slow (256 passes) but free of atomics and races.
#include <cuda_runtime.h>

__global__ void histogram_reference(const unsigned char* data, unsigned int* bins, int n) {
  const int bin = blockIdx.x;
  __shared__ unsigned int counts[256];
  unsigned int c = 0;
  for (int i = threadIdx.x; i < n; i += 256) c += data[i] == bin;
  counts[threadIdx.x] = c;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) counts[threadIdx.x] += counts[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) bins[bin] = counts[0];
}

extern "C" void histogram(const unsigned char* data, unsigned int* bins, int n, cudaStream_t stream) {
  histogram_reference<<<256, 256, 0, stream>>>(data, bins, n);
}
