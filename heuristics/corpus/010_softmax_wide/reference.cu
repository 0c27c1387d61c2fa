#include <cuda_runtime.h>

__global__ void softmax_reference(const float* x, float* y, int cols) {
  __shared__ double red[256];
  const float* row = x + (size_t)blockIdx.x * cols;
  double m = -1e300;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmax(m, (double)row[c]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) { if (threadIdx.x < k) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + k]); __syncthreads(); }
  m = red[0];
  __syncthreads();
  double s = 0.0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += exp((double)row[c] - m);
  red[threadIdx.x] = s;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) { if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k]; __syncthreads(); }
  s = red[0];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[(size_t)blockIdx.x * cols + c] = (float)(exp((double)row[c] - m) / s);
}

extern "C" void softmax_wide(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  softmax_reference<<<rows, 256, 0, stream>>>(x, y, cols);
}
