// Baseline: one block per row, three passes over the row (max, sum of exponentials,
// normalize), shared-memory tree reductions. The kernel most codebases start from.
#include <cuda_runtime.h>
#include <float.h>

#ifndef BLOCK
#define BLOCK 256
#endif

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float red[BLOCK];
  const float* row = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;

  float m = -FLT_MAX;
  for (int c = threadIdx.x; c < cols; c += BLOCK) m = fmaxf(m, row[c]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();

  float sum = 0.f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) sum += expf(row[c] - m);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  float inv = 1.f / red[0];

  for (int c = threadIdx.x; c < cols; c += BLOCK) out[c] = expf(row[c] - m) * inv;
}

extern "C" void softmax(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  softmax_rows<<<rows, BLOCK, 0, stream>>>(x, y, cols);
}
