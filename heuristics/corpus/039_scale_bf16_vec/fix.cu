#include <cuda_runtime.h>
#include <cuda_bf16.h>

__global__ void scale_vec(const uint4* __restrict__ x, uint4* __restrict__ y, int groups) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  uint4 v = x[g];
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
  const __nv_bfloat162 half2 = __floats2bfloat162_rn(0.5f, 0.5f);
#pragma unroll
  for (int k = 0; k < 4; k++) h[k] = __hmul2(h[k], half2);
  y[g] = v;
}

__global__ void scale_tail(const __nv_bfloat16* x, __nv_bfloat16* y, int start, int n) {
  int i = start + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16(0.5f * __bfloat162float(x[i]));
}

extern "C" void scale_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  int groups = n / 8;
  if (groups > 0) scale_vec<<<(groups + 255) / 256, 256, 0, stream>>>((const uint4*)x, (uint4*)y, groups);
  if (n % 8) scale_tail<<<1, 32, 0, stream>>>(x, y, groups * 8, n);
}
