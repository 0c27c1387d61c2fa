#include <cuda_runtime.h>

__global__ void fourier_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float acc = 0.0f;
  for (int k = 1; k <= 8; k++) acc += sinf(k * v) / k;
  y[i] = acc;
}

extern "C" void fourier_partial(const float* x, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  fourier_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
}
