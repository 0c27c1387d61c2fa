#include <cuda_runtime.h>

__global__ void tile_series_reference(const float* x, float* y, int n, int terms) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {

    float u = 0.9f * x[i];
    float p = 0.0f, q = 0.0f;
    for (int t = 0; t < terms; t++) {
      p = fmaf(p, u, 1.0f);
      q = fmaf(q, -u, 0.5f);
    }
    y[i] = p + q;

  }
}

extern "C" void tile_series(const float* x, float* y, int n, int terms, cudaStream_t stream) {
  if (n <= 0) return;
  tile_series_reference<<<(n + 127) / 128, 128, 0, stream>>>(x, y, n, terms);
}
