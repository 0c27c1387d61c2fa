// Trusted reference: one block of 256 threads per row. The absolute maximum is exact in
// any order (a max of bf16 values widened to float). Then, spelled out so that no
// compiler flag can change it:
//   scale = amax / 127 (IEEE fp32 division, round to nearest even),
//   q     = clamp(__float2int_rn(x / scale), -127, 127), the quotient an IEEE fp32
//           division and the rounding to integer half-to-even; q = 0 when amax = 0.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

__global__ void rowwise_quant_int8_reference(const __nv_bfloat16* x, int8_t* q, float* scale, int cols) {
  __shared__ float red[256];
  const __nv_bfloat16* xr = x + (size_t)blockIdx.x * cols;
  int8_t* qr = q + (size_t)blockIdx.x * cols;
  float m = 0.0f;
  for (int c = threadIdx.x; c < cols; c += 256) m = fmaxf(m, fabsf(__bfloat162float(xr[c])));
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  const float amax = red[0];
  const float s = __fdiv_rn(amax, 127.0f);
  if (threadIdx.x == 0) scale[blockIdx.x] = s;
  for (int c = threadIdx.x; c < cols; c += 256) {
    int v = amax > 0.0f ? __float2int_rn(__fdiv_rn(__bfloat162float(xr[c]), s)) : 0;
    qr[c] = (int8_t)max(-127, min(127, v));
  }
}

extern "C" void rowwise_quant_int8(const __nv_bfloat16* x, int8_t* q, float* scale, int rows, int cols,
                                   cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  rowwise_quant_int8_reference<<<rows, 256, 0, stream>>>(x, q, scale, cols);
}
