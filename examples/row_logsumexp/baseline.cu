// Per-token logsumexp of MoE router logits (used for the router z-loss and to turn the
// top-k logits into probabilities): lse[r] = log(sum_c exp(logits[r, c])).
// logits is rows x cols (tokens x experts), fp32, row-major. One thread per token, with
// the usual max subtraction for stability: one pass for the max, one for the sum.
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>

__global__ void row_logsumexp_kernel(const float* logits, float* lse, int rows, int cols) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* p = logits + (size_t)row * cols;

  float m = -FLT_MAX;
  for (int c = 0; c < cols; ++c) m = fmaxf(m, p[c]);

  float sum = 0.0f;
  for (int c = 0; c < cols; ++c) sum += expf(p[c] - m);

  lse[row] = m + logf(sum);
}

extern "C" void row_logsumexp(const float* logits, float* lse, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const int threads = 256;
  const int blocks = (rows + threads - 1) / threads;
  row_logsumexp_kernel<<<blocks, threads, 0, stream>>>(logits, lse, rows, cols);
}
