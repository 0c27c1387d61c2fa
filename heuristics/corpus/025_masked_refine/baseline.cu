#include <cuda_runtime.h>

__device__ float refine(float v) {
  // Newton iterations for the real cube root of v, from a rough start.
  float r = v >= 0.0f ? 1.0f : -1.0f;
  for (int k = 0; k < 48; k++) r = r - (r * r * r - v) / (3.0f * r * r);
  return r;
}

__global__ void refine_kernel(const float* x, const unsigned char* mask, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  if (mask[i] != 0) {
    y[i] = v;
    return;
  }
  y[i] = refine(v);
}

extern "C" void masked_refine(const float* x, const unsigned char* mask, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  refine_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, mask, y, n);
}
