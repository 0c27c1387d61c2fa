// Row-wise symmetric int8 quantization of bf16 activations (the input side of an int8
// GEMM, as in LLM.int8() / SmoothQuant-style W8A8 inference): for every row (token)
//   scale[r] = max_c |x[r, c]| / 127
//   q[r, c]  = clamp(round_half_even(x[r, c] / scale[r]), -127, 127)   (0 for a zero row)
// x is rows x cols bf16, row-major; q is rows x cols int8; scale is rows float.
// One thread per row: a first pass for the absolute maximum, a second to convert.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

__global__ void rowwise_quant_int8_kernel(const __nv_bfloat16* x, int8_t* q, float* scale, int rows, int cols) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const __nv_bfloat16* xr = x + (size_t)row * cols;
  int8_t* qr = q + (size_t)row * cols;

  float amax = 0.0f;
  for (int c = 0; c < cols; ++c) amax = fmaxf(amax, fabsf(__bfloat162float(xr[c])));
  const float s = amax / 127.0f;
  scale[row] = s;

  for (int c = 0; c < cols; ++c) {
    int v = 0;
    if (amax > 0.0f) v = __float2int_rn(__bfloat162float(xr[c]) / s);
    v = max(-127, min(127, v));
    qr[c] = (int8_t)v;
  }
}

extern "C" void rowwise_quant_int8(const __nv_bfloat16* x, int8_t* q, float* scale, int rows, int cols,
                                   cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const int threads = 256;
  const int blocks = (rows + threads - 1) / threads;
  rowwise_quant_int8_kernel<<<blocks, threads, 0, stream>>>(x, q, scale, rows, cols);
}
