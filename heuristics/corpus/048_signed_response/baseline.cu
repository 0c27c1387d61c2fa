#include <cuda_runtime.h>

// A two-stage leaky filter driven by x for steps ticks; the first stage leaks faster for
// negative inputs than for positive ones.
__global__ void signed_response_kernel(const float* x, float* y, int n, int steps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float p = v, q = 0.0f;
  if (v >= 0.0f) {
    for (int s = 0; s < steps; s++) {
      p = fmaf(p, 0.999f, 0.001f);
      q = fmaf(q, 0.995f, p);
    }
  } else {
    for (int s = 0; s < steps; s++) {
      p = fmaf(p, 0.99f, 0.001f);
      q = fmaf(q, 0.995f, p);
    }
  }
  y[i] = q;
}

extern "C" void signed_response(const float* x, float* y, int n, int steps, cudaStream_t stream) {
  if (n <= 0) return;
  signed_response_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n, steps);
}
