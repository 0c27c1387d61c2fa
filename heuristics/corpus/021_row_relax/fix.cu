#include <cuda_runtime.h>

__global__ void relax_fine(const float* __restrict__ x, float* __restrict__ y, int steps) {
  int i = blockIdx.x * 256 + threadIdx.x;

  float v = x[i], w = 0.0f;
  for (int s = 0; s < steps; s++) {
    v = fmaf(v, 0.9995f, 0.0005f);
    w = fmaf(w, 0.999f, v);
  }
  y[i] = w;

}

extern "C" void row_relax(const float* x, float* y, int rows, int steps, cudaStream_t stream) {
  if (rows <= 0) return;
  relax_fine<<<rows * 4, 256, 0, stream>>>(x, y, steps);
}
