#include <cuda_runtime.h>

__global__ void relax_reference(const float* x, float* y, int n, int steps) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {

  float v = x[i], w = 0.0f;
  for (int s = 0; s < steps; s++) {
    v = fmaf(v, 0.9995f, 0.0005f);
    w = fmaf(w, 0.999f, v);
  }
  y[i] = w;

  }
}

extern "C" void row_relax(const float* x, float* y, int rows, int steps, cudaStream_t stream) {
  if (rows <= 0) return;
  relax_reference<<<(rows * 1024 + 127) / 128, 128, 0, stream>>>(x, y, rows * 1024, steps);
}
