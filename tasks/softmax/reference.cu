// Trusted reference: one block per row, max and sum accumulated in double, each output
// computed in double and rounded once.
#include <cuda_runtime.h>

__global__ void softmax_reference(const float* x, float* y, int cols) {
  __shared__ double red[256];
  const float* row = x + (size_t)blockIdx.x * cols;
  double m = -1e300;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmax(m, (double)row[c]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  double sum = 0.0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += exp((double)row[c] - m);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  sum = red[0];
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    y[(size_t)blockIdx.x * cols + c] = (float)(exp((double)row[c] - m) / sum);
}

extern "C" void softmax(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  softmax_reference<<<rows, 256, 0, stream>>>(x, y, cols);
}
