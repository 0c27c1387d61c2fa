#include <cuda_runtime.h>

__global__ void gemv_warp(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (warp >= rows) return;
  const float* row = A + (size_t)warp * cols;
  float acc = 0.0f;
  for (int c = lane; c < cols; c += 32) acc += row[c] * x[c];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (lane == 0) y[warp] = acc;
}

extern "C" void gemv_rows(const float* A, const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0) return;
  gemv_warp<<<(rows + 7) / 8, 256, 0, stream>>>(A, x, y, rows, cols);
}
