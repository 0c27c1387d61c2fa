#include <cuda_runtime.h>

__global__ void gated_product_kernel(const float* x, const float* g, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] * fmaxf(g[i], 0.0f);
}

extern "C" void gated_product(const float* x, const float* g, float* out, int n, cudaStream_t stream) {
  if (n <= 0) return;
  gated_product_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, g, out, n);
}
