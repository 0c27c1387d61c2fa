#include <cuda_runtime.h>

__global__ void step_reference(const float* s, float* o, int n) {
  const float dt = 0.01f;
  const float field[3] = {0.5f, -0.25f, 1.0f};
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float* p = s + 8 * (size_t)i;
    float* q = o + 8 * (size_t)i;
    float qm = p[7] / p[6];
    for (int d = 0; d < 3; d++) {
      float v = p[3 + d] + qm * field[d] * dt;
      q[d] = p[d] + v * dt;
      q[3 + d] = v;
    }
    q[6] = p[6];
    q[7] = p[7];
  }
}

extern "C" void particles_step(const float* state, float* next_state, int n, cudaStream_t stream) {
  if (n <= 0) return;
  step_reference<<<1024, 256, 0, stream>>>(state, next_state, n);
}
