#include <cuda_runtime.h>

__global__ void gated_product_reference(const float* x, const float* g, float* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float gate = g[i] > 0.0f ? g[i] : 0.0f;
    out[i] = x[i] * gate;
  }
}

extern "C" void gated_product(const float* x, const float* g, float* out, int n, cudaStream_t stream) {
  if (n <= 0) return;
  gated_product_reference<<<1024, 256, 0, stream>>>(x, g, out, n);
}
