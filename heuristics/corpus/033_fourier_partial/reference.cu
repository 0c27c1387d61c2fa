#include <cuda_runtime.h>

__global__ void fourier_reference(const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    double v = x[i];
    double acc = 0.0;
    for (int k = 1; k <= 8; k++) acc += sin(k * v) / k;
    y[i] = (float)acc;
  }
}

extern "C" void fourier_partial(const float* x, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  fourier_reference<<<1024, 256, 0, stream>>>(x, y, n);
}
