#include <cuda_runtime.h>

// Each block owns one tile of 32768 consecutive elements; its 1024 threads walk the tile.
__global__ void tile_series_kernel(const float* x, float* y, int n, int terms) {
  int base = blockIdx.x * 32768;
  for (int k = 0; k < 32; k++) {
    int i = base + k * 1024 + threadIdx.x;
    if (i >= n) return;

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
  tile_series_kernel<<<(n + 32767) / 32768, 1024, 0, stream>>>(x, y, n, terms);
}
