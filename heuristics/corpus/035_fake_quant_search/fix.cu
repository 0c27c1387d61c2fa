#include <cuda_runtime.h>

#define CANDIDATES 64

__global__ void fake_quant_float(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds |t| < 2^22 to an integer (ties to even)

  float v = x[i];
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < CANDIDATES; k++) {
    float s = 0.0025f * (k + 1), inv = 400.0f / (k + 1);
    // __fmul_rn/__fadd_rn keep the product rounded on its own (no FFMA contraction).
    float q = __fsub_rn(__fadd_rn(__fmul_rn(v, inv), magic), magic);
    acc += fabsf(fmaf(q, s, -v));
  }
  y[i] = acc * (1.0f / CANDIDATES);
}

extern "C" void fake_quant_search(const float* x, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  fake_quant_float<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
}
