#include <cuda_runtime.h>

#define F 128

__global__ void stats_kernel(const float* x, float* stats, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float w[F];
#pragma unroll
  for (int f = 0; f < F; f++) w[f] = x[(size_t)f * n + i];
  float sum = 0.0f, lo = w[0], hi = w[0];
#pragma unroll
  for (int f = 0; f < F; f++) {
    sum += w[f];
    lo = fminf(lo, w[f]);
    hi = fmaxf(hi, w[f]);
  }
  float mean = sum / F;
  float var = 0.0f;
#pragma unroll
  for (int f = 0; f < F; f++) var += (w[f] - mean) * (w[f] - mean);
  stats[i] = mean;
  stats[n + i] = sqrtf(var / F);
  stats[2 * (size_t)n + i] = lo;
  stats[3 * (size_t)n + i] = hi;
}

extern "C" void feature_stats(const float* x, float* stats, int n, cudaStream_t stream) {
  if (n <= 0) return;
  stats_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, stats, n);
}
