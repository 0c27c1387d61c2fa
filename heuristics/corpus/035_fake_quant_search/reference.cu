#include <cuda_runtime.h>

__global__ void fake_quant_reference(const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {

  float v = x[i];
  float best = 0.0f, best_err = INFINITY;
  for (int k = 0; k < 32; k++) {
    float s = 0.005f * (k + 1), inv = 200.0f / (k + 1);

      float q = nearbyintf(v * inv);
      q = q < -127.0f ? -127.0f : (q > 127.0f ? 127.0f : q);
      float d = q * s;
      float err = fabsf(d - v);
      if (err < best_err) { best_err = err; best = d; }
    }
    y[i] = best;
  }
}

extern "C" void fake_quant_search(const float* x, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  fake_quant_reference<<<1024, 256, 0, stream>>>(x, y, n);
}
