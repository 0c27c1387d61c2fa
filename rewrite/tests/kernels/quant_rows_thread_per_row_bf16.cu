// entry: quant_rows_bf16
// arg: x in __nv_bfloat16 rows*cols
// arg: q out int8_t rows*cols tolerance 0 1
// arg: scale out float rows tolerance 1e-6 0
// arg: rows int 16384
// arg: cols int 4096
// tolerance: 0 0
// expect: declines vectorize: `quant_rows_kernel`: each element runs a loop while `c < cols`, a trip count known only at run time; coarsening would run V such loops one after another in a thread (V times fewer threads, each V times longer) while what the loop reads still moves one element at a time
// expect: applies cooperative
// expect: applies reciprocal: divisions in loops as multiplications by a reciprocal computed once: `quant_rows_kernel`: 1 division(s) by `s` (1)
// expect: declines shuffle-reduce
// Row-wise int8 quantization as first versions ship it: a thread per row, an absmax
// pass, then a convert pass that reads the row only when it is not all zeros.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

__global__ void quant_rows_kernel(const __nv_bfloat16* x, int8_t* q, float* scale, int rows, int cols) {
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
    qr[c] = (int8_t)max(-127, min(127, v));
  }
}

extern "C" void quant_rows_bf16(const __nv_bfloat16* x, int8_t* q, float* scale, int rows, int cols,
                                cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  quant_rows_kernel<<<(rows + 255) / 256, 256, 0, stream>>>(x, q, scale, rows, cols);
}
