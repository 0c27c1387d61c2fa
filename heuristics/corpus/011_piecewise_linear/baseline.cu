#include <cuda_runtime.h>

#define MAX_SEGMENTS 64

__global__ void pwl_kernel(const float* x, const float* deltas, float* y, int n, int segments) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float k[MAX_SEGMENTS + 1];
  k[0] = deltas[0];
  for (int j = 1; j <= segments; j++) k[j] = k[j - 1] + deltas[j];
  float v = x[i];

  float u = (v + 4.0f) * (segments * 0.125f);
  int seg = min(max((int)floorf(u), 0), segments - 1);
  float t = fminf(fmaxf(u - seg, 0.0f), 1.0f);

  y[i] = k[seg] + t * (k[seg + 1] - k[seg]);
}

extern "C" void piecewise_linear(const float* x, const float* deltas, float* y, int n, int segments, cudaStream_t stream) {
  if (n <= 0 || segments < 1 || segments > MAX_SEGMENTS) return;
  pwl_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, deltas, y, n, segments);
}
