// Baseline and reference: y = sqrtf(x), NaN where x < 0.
#include <cuda_runtime.h>

__global__ void nan_sqrt_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = sqrtf(x[i]);
}

extern "C" void nan_sqrt(const float* x, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  nan_sqrt_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
}
