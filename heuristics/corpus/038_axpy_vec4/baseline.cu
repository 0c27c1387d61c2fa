#include <cuda_runtime.h>

__global__ void axpy_vec(const float4* __restrict__ x, const float4* __restrict__ y, float4* __restrict__ z, int groups) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  float4 a = x[g], b = y[g];
  z[g] = make_float4(2.0f * a.x + b.x, 2.0f * a.y + b.y, 2.0f * a.z + b.z, 2.0f * a.w + b.w);
}

__global__ void axpy_tail(const float* x, const float* y, float* z, int start, int n) {
  int i = start + threadIdx.x;
  if (i < n) z[i] = 2.0f * x[i] + y[i];
}

extern "C" void axpy_vec4(const float* x, const float* y, float* z, int n, cudaStream_t stream) {
  if (n <= 0) return;
  int groups = n / 4;
  if (groups > 0) axpy_vec<<<(groups + 255) / 256, 256, 0, stream>>>((const float4*)x, (const float4*)y, (float4*)z, groups);
  if (n % 4) axpy_tail<<<1, 32, 0, stream>>>(x, y, z, groups * 4, n);
}
