#include <cuda_runtime.h>

__global__ void gemv_reference(const float* A, const float* x, float* y, int rows, int cols) {
  __shared__ double part[256];
  int r = blockIdx.x;
  double acc = 0.0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += (double)A[(size_t)r * cols + c] * x[c];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[r] = (float)part[0];
}

extern "C" void gemv_rows(const float* A, const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0) return;
  gemv_reference<<<rows, 256, 0, stream>>>(A, x, y, rows, cols);
}
