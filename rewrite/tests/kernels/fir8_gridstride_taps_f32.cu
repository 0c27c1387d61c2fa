// entry: fir8
// arg: x in float n+7
// arg: h in float 8
// arg: y out float n
// arg: n int 16777216
// tolerance: 1e-5 1e-6
// expect: applies register-table: `fir8_kernel`: `h` elements 0..8 in registers for 1 read(s)
// expect: applies unroll
#include <cuda_runtime.h>

#define TAPS 8

// An 8-tap FIR filter over a grid-stride loop: every element reads the same eight taps.
__global__ void fir8_kernel(const float* __restrict__ x, const float* __restrict__ h, float* __restrict__ y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float acc = 0.f;
    for (int k = 0; k < TAPS; ++k) acc += h[k] * x[i + k];
    y[i] = acc;
  }
}

extern "C" void fir8(const float* x, const float* h, float* y, int n, cudaStream_t stream) {
  fir8_kernel<<<264, 256, 0, stream>>>(x, h, y, n);
}
