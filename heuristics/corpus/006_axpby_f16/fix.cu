#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void axpby_vec(const uint4* __restrict__ x, const uint4* __restrict__ y, uint4* __restrict__ z, int groups) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  uint4 a = x[g], b = y[g], c;
  const __half2* ha = reinterpret_cast<const __half2*>(&a);
  const __half2* hb = reinterpret_cast<const __half2*>(&b);
  __half2* hc = reinterpret_cast<__half2*>(&c);
#pragma unroll
  for (int k = 0; k < 4; k++) {
    float2 fa = __half22float2(ha[k]), fb = __half22float2(hb[k]);
    hc[k] = __floats2half2_rn(2.0f * fa.x + 0.5f * fb.x, 2.0f * fa.y + 0.5f * fb.y);
  }
  z[g] = c;
}

__global__ void axpby_tail(const __half* x, const __half* y, __half* z, int start, int n) {
  int i = start + blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = __float2half(2.0f * __half2float(x[i]) + 0.5f * __half2float(y[i]));
}

extern "C" void axpby_f16(const __half* x, const __half* y, __half* z, int n, cudaStream_t stream) {
  if (n <= 0) return;
  int groups = n / 8;
  if (groups > 0) axpby_vec<<<(groups + 255) / 256, 256, 0, stream>>>((const uint4*)x, (const uint4*)y, (uint4*)z, groups);
  if (n - groups * 8 > 0) axpby_tail<<<1, 32, 0, stream>>>(x, y, z, groups * 8, n);
}
