#include <cuda_runtime.h>

__global__ void smooth_fused(const float* __restrict__ x, float* __restrict__ y, int n, int steps) {
  extern __shared__ float buf[];
  float* a = buf;
  float* b = buf + n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) a[i] = x[i];
  __syncthreads();
  for (int s = 0; s < steps; s++) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) b[i] = 0.25f * a[max(i - 1, 0)] + 0.5f * a[i] + 0.25f * a[min(i + 1, n - 1)];
    __syncthreads();
    float* t = a; a = b; b = t;
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = a[i];
}

extern "C" void iterated_smoothing(const float* x, float* y, int n, int steps, cudaStream_t stream) {
  if (n <= 0 || n > 8192 || steps <= 0) return;
  size_t bytes = 2 * (size_t)n * sizeof(float);
  cudaFuncSetAttribute(smooth_fused, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  smooth_fused<<<1, 1024, bytes, stream>>>(x, y, n, steps);
}
