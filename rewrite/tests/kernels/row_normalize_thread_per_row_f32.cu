// entry: row_normalize_f32
// arg: x in float rows*cols
// arg: y out float rows*cols
// arg: rows int 65536
// arg: cols int 1024
// tolerance: 1e-5 1e-6
// expect: applies reciprocal: divisions in loops as multiplications by a reciprocal computed once: `row_normalize_kernel`: 1 division(s) by `denom` (1)
// expect: declines intrinsics
// L1 normalization of rows as first versions ship it: a thread per row sums the row,
// then divides every element by the sum.
#include <cuda_runtime.h>

__global__ void row_normalize_kernel(const float* x, float* y, int rows, int cols) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* xr = x + (size_t)row * cols;
  float* yr = y + (size_t)row * cols;
  float total = 0.0f;
  for (int c = 0; c < cols; ++c) total += fabsf(xr[c]);
  total = fmaxf(total, 1e-12f);
  const float denom = total;
  for (int c = 0; c < cols; ++c) yr[c] = xr[c] / denom;
}

extern "C" void row_normalize_f32(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  row_normalize_kernel<<<(rows + 127) / 128, 128, 0, stream>>>(x, y, rows, cols);
}
