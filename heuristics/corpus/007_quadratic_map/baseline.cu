#include <cuda_runtime.h>

__global__ void quad_kernel(const float* x, float* y, int n) {
  int base = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
  for (int k = 0; k < 4; k++) {
    int i = base + k;
    if (i < n) {
      float v = x[i];
      y[i] = (0.5f * v - 1.5f) * v + 0.25f;
    }
  }
}

extern "C" void quadratic_map(const float* x, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  int threads = (n + 3) / 4;
  quad_kernel<<<(threads + 255) / 256, 256, 0, stream>>>(x, y, n);
}
