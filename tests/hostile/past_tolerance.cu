// expect: wrong-answer
// task: softmax
// threat: wrong but equal
// why: a correct softmax scaled by (1 + 2e-5): just past the task's rtol of 1e-5
#include <cuda_runtime.h>
#include <float.h>
__global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
  int r = blockIdx.x;
  if (r >= rows) return;
  const float* in = x + (size_t)r * cols;
  float* out = y + (size_t)r * cols;
  __shared__ float red[256];
  float m = -FLT_MAX;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, in[j]);
  red[threadIdx.x] = m; __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) { if (threadIdx.x < o) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + o]); __syncthreads(); }
  m = red[0]; __syncthreads();
  float sum = 0.f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) sum += expf(in[j] - m);
  red[threadIdx.x] = sum; __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) { if (threadIdx.x < o) red[threadIdx.x] += red[threadIdx.x + o]; __syncthreads(); }
  sum = red[0];
  for (int j = threadIdx.x; j < cols; j += blockDim.x) out[j] = expf(in[j] - m) / sum * (1.0f + 2e-5f);
}
extern "C" void softmax(const float* x, float* y, int rows, int cols, cudaStream_t s) {
  if (rows > 0 && cols > 0) softmax_rows<<<rows, 256, 0, s>>>(x, y, rows, cols);
}
