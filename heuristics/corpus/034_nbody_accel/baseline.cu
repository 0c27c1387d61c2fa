#include <cuda_runtime.h>

#define TILE 256

__global__ void accel_kernel(const float4* bodies, float4* accel, int n) {
  __shared__ float4 tile[TILE];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 me = i < n ? bodies[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  float ax = 0.f, ay = 0.f, az = 0.f;
  for (int base = 0; base < n; base += TILE) {
    int j = base + threadIdx.x;
    tile[threadIdx.x] = j < n ? bodies[j] : make_float4(0.f, 0.f, 0.f, 0.f);
    __syncthreads();
    int count = min(TILE, n - base);
    for (int k = 0; k < count; k++) {
      float4 o = tile[k];
      float dx = o.x - me.x, dy = o.y - me.y, dz = o.z - me.z;
      float r2 = dx * dx + dy * dy + dz * dz + 1e-2f;
      float s = o.w / (sqrtf(r2) * r2);
      ax += dx * s;
      ay += dy * s;
      az += dz * s;
    }
    __syncthreads();
  }
  if (i < n) accel[i] = make_float4(ax, ay, az, 0.f);
}

extern "C" void nbody_accel(const float* bodies, float* accel, int n, cudaStream_t stream) {
  if (n <= 0) return;
  accel_kernel<<<(n + TILE - 1) / TILE, TILE, 0, stream>>>((const float4*)bodies, (float4*)accel, n);
}
