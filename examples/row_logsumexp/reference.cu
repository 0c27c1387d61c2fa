// Trusted reference: one block per row, max and sum of exponentials accumulated in
// double with a shared-memory tree, the result rounded to fp32 once.
#include <cuda_runtime.h>

__global__ void row_logsumexp_reference(const float* logits, float* lse, int cols) {
  __shared__ double red[256];
  const float* p = logits + (size_t)blockIdx.x * cols;
  double m = -1e300;
  for (int c = threadIdx.x; c < cols; c += 256) m = fmax(m, (double)p[c]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  double sum = 0.0;
  for (int c = threadIdx.x; c < cols; c += 256) sum += exp((double)p[c] - m);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) lse[blockIdx.x] = (float)(m + log(red[0]));
}

extern "C" void row_logsumexp(const float* logits, float* lse, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  row_logsumexp_reference<<<rows, 256, 0, stream>>>(logits, lse, cols);
}
