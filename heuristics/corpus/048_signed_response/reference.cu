#include <cuda_runtime.h>

__global__ void signed_response_reference(const float* x, float* y, int n, int steps) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float v = x[i];
    float a = 0.999f;
    if (v < 0.0f) a = 0.99f;
    float p = v, q = 0.0f;
    for (int s = 0; s < steps; s++) {
      p = fmaf(p, a, 0.001f);
      q = fmaf(q, 0.995f, p);
    }
    y[i] = q;
  }
}

extern "C" void signed_response(const float* x, float* y, int n, int steps, cudaStream_t stream) {
  if (n <= 0) return;
  signed_response_reference<<<1024, 128, 0, stream>>>(x, y, n, steps);
}
