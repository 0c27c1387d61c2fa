#include <cuda_runtime.h>

__global__ void blend_three_reference(const float* w, const float* x, const float* z, float* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    double a = w[i];
    out[i] = (float)(a * x[i] + (1.0 - a) * z[i]);
  }
}

extern "C" void blend_three(const float* w, const float* x, const float* z, float* out, int n, cudaStream_t stream) {
  if (n <= 0) return;
  blend_three_reference<<<1024, 256, 0, stream>>>(w, x, z, out, n);
}
