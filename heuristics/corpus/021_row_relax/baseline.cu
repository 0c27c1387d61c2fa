#include <cuda_runtime.h>

__global__ void relax_kernel(const float* x, float* y, int steps) {
  int i = blockIdx.x * 1024 + threadIdx.x;

  float v = x[i], w = 0.0f;
  for (int s = 0; s < steps; s++) {
    v = fmaf(v, 0.9995f, 0.0005f);
    w = fmaf(w, 0.999f, v);
  }
  y[i] = w;

}

extern "C" void row_relax(const float* x, float* y, int rows, int steps, cudaStream_t stream) {
  if (rows <= 0) return;
  relax_kernel<<<rows, 1024, 0, stream>>>(x, y, steps);
}
