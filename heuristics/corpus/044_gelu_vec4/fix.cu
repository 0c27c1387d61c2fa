#include <cuda_runtime.h>

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))); }

__global__ void gelu_vec(const float4* __restrict__ x, float4* __restrict__ y, int groups) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  float4 v = x[g];
  y[g] = make_float4(gelu(v.x), gelu(v.y), gelu(v.z), gelu(v.w));
}

__global__ void gelu_tail(const float* x, float* y, int start, int n) {
  int i = start + threadIdx.x;
  if (i < n) y[i] = gelu(x[i]);
}

extern "C" void gelu_vec4(const float* x, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  int groups = n / 4;
  if (groups > 0) gelu_vec<<<(groups + 255) / 256, 256, 0, stream>>>((const float4*)x, (float4*)y, groups);
  if (n % 4) gelu_tail<<<1, 32, 0, stream>>>(x, y, groups * 4, n);
}
