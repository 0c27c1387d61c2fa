#include <cuda_runtime.h>

__device__ float g_scratch[65536];

__global__ void smooth_step(const float* a, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 0.25f * a[max(i - 1, 0)] + 0.5f * a[i] + 0.25f * a[min(i + 1, n - 1)];
}

extern "C" void iterated_smoothing(const float* x, float* y, int n, int steps, cudaStream_t stream) {
  if (n <= 0 || n > 65536 || steps <= 0) return;
  float* tmp = nullptr;
  cudaGetSymbolAddress((void**)&tmp, g_scratch);
  const float* src = x;
  for (int s = 0; s < steps; s++) {
    float* dst = ((steps - 1 - s) % 2 == 0) ? y : tmp;  // the last pass writes y
    smooth_step<<<(n + 255) / 256, 256, 0, stream>>>(src, dst, n);
    src = dst;
  }
}
