#include <cuda_runtime.h>

__global__ void gelu_reference(const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    double v = x[i];
    y[i] = (float)(0.5 * v * (1.0 + tanh(0.7978845608 * (v + 0.044715 * v * v * v))));
  }
}

extern "C" void gelu_tanh(const float* x, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  gelu_reference<<<1024, 256, 0, stream>>>(x, y, n);
}
