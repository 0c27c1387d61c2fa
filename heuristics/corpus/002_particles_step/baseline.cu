#include <cuda_runtime.h>

struct Particle {
  float x, y, z;
  float vx, vy, vz;
  float mass, charge;
};

__constant__ float kField[3] = {0.5f, -0.25f, 1.0f};

__global__ void step_kernel(const Particle* state, Particle* next, int n, float dt) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float qm = state[i].charge / state[i].mass;
  float vx = state[i].vx + qm * kField[0] * dt;
  float vy = state[i].vy + qm * kField[1] * dt;
  float vz = state[i].vz + qm * kField[2] * dt;
  next[i].x = state[i].x + vx * dt;
  next[i].y = state[i].y + vy * dt;
  next[i].z = state[i].z + vz * dt;
  next[i].vx = vx;
  next[i].vy = vy;
  next[i].vz = vz;
  next[i].mass = state[i].mass;
  next[i].charge = state[i].charge;
}

extern "C" void particles_step(const float* state, float* next_state, int n, cudaStream_t stream) {
  if (n <= 0) return;
  step_kernel<<<(n + 255) / 256, 256, 0, stream>>>((const Particle*)state, (Particle*)next_state, n, 0.01f);
}
