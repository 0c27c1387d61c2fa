#include <cuda_runtime.h>

__global__ void fourier_fast(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  // sin(k x) = sin(k r) for r = x - 2 pi m: reduce once, in two parts so r stays exact enough.
  float v = x[i];
  float m = rintf(v * 0.15915494309f);
  float r = fmaf(-m, 6.28318548203f, v);
  r = fmaf(m, 1.7484556e-7f, r);
  float acc = 0.0f;
#pragma unroll
  for (int k = 1; k <= 8; k++) acc += __sinf(k * r) * (1.0f / k);
  y[i] = acc;
}

extern "C" void fourier_partial(const float* x, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  fourier_fast<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
}
