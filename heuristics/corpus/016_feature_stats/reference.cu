#include <cuda_runtime.h>

__global__ void stats_reference(const float* x, float* clipped, float* stats, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    double sum = 0.0, lo = 3.0, hi = -3.0;
    for (int f = 0; f < 128; f++) {
      float c = fminf(fmaxf(x[(size_t)f * n + i], -3.0f), 3.0f);
      clipped[(size_t)f * n + i] = c;
      double v = c;
      sum += v;
      lo = fmin(lo, v);
      hi = fmax(hi, v);
    }
    double mean = sum / 128;
    double var = 0.0;
    for (int f = 0; f < 128; f++) {
      double d = (double)clipped[(size_t)f * n + i] - mean;
      var += d * d;
    }
    stats[i] = (float)mean;
    stats[n + i] = (float)sqrt(var / 128);
    stats[2 * (size_t)n + i] = (float)lo;
    stats[3 * (size_t)n + i] = (float)hi;
  }
}

extern "C" void feature_stats(const float* x, float* clipped, float* stats, int n, cudaStream_t stream) {
  if (n <= 0) return;
  stats_reference<<<1024, 256, 0, stream>>>(x, clipped, stats, n);
}
