#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
}

extern "C" void gelu_tanh(const float* x, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  gelu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
}
