#include <cuda_runtime.h>

__global__ void gemv_kernel(const float* A, const float* x, float* y, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.0f;
  for (int c = 0; c < cols; c++) acc += A[(size_t)r * cols + c] * x[c];
  y[r] = acc;
}

extern "C" void gemv_rows(const float* A, const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0) return;
  gemv_kernel<<<(rows + 127) / 128, 128, 0, stream>>>(A, x, y, rows, cols);
}
