#include <cuda_runtime.h>

__device__ float refine(float v) {
  // Newton iterations for the real cube root of v, from a rough start.
  float r = v >= 0.0f ? 1.0f : -1.0f;
  for (int k = 0; k < 48; k++) r = r - (r * r * r - v) / (3.0f * r * r);
  return r;
}

__global__ void refine_reference(const float* x, const unsigned char* mask, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = mask[i] != 0 ? x[i] : refine(x[i]);
}

extern "C" void masked_refine(const float* x, const unsigned char* mask, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  refine_reference<<<1024, 256, 0, stream>>>(x, mask, y, n);
}
