#include <cuda_runtime.h>

__device__ __forceinline__ float quad(float v) { return (0.5f * v - 1.5f) * v + 0.25f; }

__global__ void quad_vec(const float4* __restrict__ x, float4* __restrict__ y, int groups) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  float4 v = x[g];
  y[g] = make_float4(quad(v.x), quad(v.y), quad(v.z), quad(v.w));
}

__global__ void quad_tail(const float* x, float* y, int start, int n) {
  int i = start + threadIdx.x;
  if (i < n) y[i] = quad(x[i]);
}

extern "C" void quadratic_map(const float* x, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  int groups = n / 4;
  if (groups > 0) quad_vec<<<(groups + 255) / 256, 256, 0, stream>>>((const float4*)x, (float4*)y, groups);
  if (n % 4) quad_tail<<<1, 32, 0, stream>>>(x, y, groups * 4, n);
}
