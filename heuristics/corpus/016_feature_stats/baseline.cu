#include <cuda_runtime.h>

#define F 128
#define CLIP 3.0f

// Per sample (one thread): clip its 128 features to [-3, 3], write the clipped copy, and
// compute mean, standard deviation, min and max of the clipped values (two-pass variance
// over the values kept in a register array).
__global__ void stats_kernel(const float* x, float* clipped, float* stats, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float w[F];
#pragma unroll
  for (int f = 0; f < F; f++) {
    float v = fminf(fmaxf(x[(size_t)f * n + i], -CLIP), CLIP);
    clipped[(size_t)f * n + i] = v;
    w[f] = v;
  }
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

extern "C" void feature_stats(const float* x, float* clipped, float* stats, int n, cudaStream_t stream) {
  if (n <= 0) return;
  stats_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, clipped, stats, n);
}
