#include <cuda_runtime.h>

__global__ void scale_shift_reference(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __fmul_rn(__fadd_rn(x[i], -0.25f), 1.75f);
}

extern "C" void scale_shift(const float* x, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  scale_shift_reference<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
}
