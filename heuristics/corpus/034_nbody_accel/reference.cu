#include <cuda_runtime.h>

__global__ void accel_reference(const float4* bodies, float4* accel, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 me = bodies[i];
  double ax = 0, ay = 0, az = 0;
  for (int j = 0; j < n; j++) {
    float4 o = bodies[j];
    double dx = (double)o.x - me.x, dy = (double)o.y - me.y, dz = (double)o.z - me.z;
    double r2 = dx * dx + dy * dy + dz * dz + 1e-2;
    double s = o.w / (sqrt(r2) * r2);
    ax += dx * s; ay += dy * s; az += dz * s;
  }
  accel[i] = make_float4((float)ax, (float)ay, (float)az, 0.f);
}

extern "C" void nbody_accel(const float* bodies, float* accel, int n, cudaStream_t stream) {
  if (n <= 0) return;
  accel_reference<<<(n + 127) / 128, 128, 0, stream>>>((const float4*)bodies, (float4*)accel, n);
}
