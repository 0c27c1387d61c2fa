#include <cuda_runtime.h>

__global__ void smooth_reference(const float* x, float* y, int n, int steps) {
  // One thread does everything: trivially correct, fine at these sizes.
  extern __shared__ float buf[];
  if (threadIdx.x != 0) return;
  float* a = buf;
  float* b = buf + n;
  for (int i = 0; i < n; i++) a[i] = x[i];
  for (int s = 0; s < steps; s++) {
    for (int i = 0; i < n; i++) b[i] = 0.25f * a[max(i - 1, 0)] + 0.5f * a[i] + 0.25f * a[min(i + 1, n - 1)];
    float* t = a; a = b; b = t;
  }
  for (int i = 0; i < n; i++) y[i] = a[i];
}

extern "C" void iterated_smoothing(const float* x, float* y, int n, int steps, cudaStream_t stream) {
  if (n <= 0 || n > 8192 || steps <= 0) return;
  size_t bytes = 2 * (size_t)n * sizeof(float);
  cudaFuncSetAttribute(smooth_reference, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  smooth_reference<<<1, 32, bytes, stream>>>(x, y, n, steps);
}
