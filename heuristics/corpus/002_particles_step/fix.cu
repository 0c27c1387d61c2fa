#include <cuda_runtime.h>

__constant__ float kField[3] = {0.5f, -0.25f, 1.0f};

// Records are 32 bytes and the buffers come from cudaMalloc: two aligned float4 per record.
__global__ void step_vec(const float4* __restrict__ state, float4* __restrict__ next, int n, float dt) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 pos = state[2 * i];      // x y z vx
  float4 rest = state[2 * i + 1]; // vy vz mass charge
  float qm = rest.w / rest.z;
  float vx = pos.w + qm * kField[0] * dt;
  float vy = rest.x + qm * kField[1] * dt;
  float vz = rest.y + qm * kField[2] * dt;
  next[2 * i] = make_float4(pos.x + vx * dt, pos.y + vy * dt, pos.z + vz * dt, vx);
  next[2 * i + 1] = make_float4(vy, vz, rest.z, rest.w);
}

extern "C" void particles_step(const float* state, float* next_state, int n, cudaStream_t stream) {
  if (n <= 0) return;
  step_vec<<<(n + 255) / 256, 256, 0, stream>>>((const float4*)state, (float4*)next_state, n, 0.01f);
}
