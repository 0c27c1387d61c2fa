#include <cuda_runtime.h>

__global__ void stats_reference(const float* x, float* stats, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    double sum = 0.0, lo = x[i], hi = x[i];
    for (int f = 0; f < 128; f++) {
      double v = x[(size_t)f * n + i];
      sum += v;
      lo = fmin(lo, v);
      hi = fmax(hi, v);
    }
    double mean = sum / 128;
    double var = 0.0;
    for (int f = 0; f < 128; f++) {
      double d = x[(size_t)f * n + i] - mean;
      var += d * d;
    }
    stats[i] = (float)mean;
    stats[n + i] = (float)sqrt(var / 128);
    stats[2 * (size_t)n + i] = (float)lo;
    stats[3 * (size_t)n + i] = (float)hi;
  }
}

extern "C" void feature_stats(const float* x, float* stats, int n, cudaStream_t stream) {
  if (n <= 0) return;
  stats_reference<<<1024, 256, 0, stream>>>(x, stats, n);
}
