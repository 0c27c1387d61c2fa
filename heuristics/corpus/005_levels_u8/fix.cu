#include <cuda_runtime.h>

__device__ __forceinline__ unsigned char level(unsigned char p) {
  int v = (p - 16) * 255 / 219;
  return (unsigned char)min(max(v, 0), 255);
}

__global__ void levels_vec(const uint4* __restrict__ in, uint4* __restrict__ out, int groups) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  uint4 v = in[g];
  unsigned char* b = reinterpret_cast<unsigned char*>(&v);
#pragma unroll
  for (int k = 0; k < 16; k++) b[k] = level(b[k]);
  out[g] = v;
}

__global__ void levels_tail(const unsigned char* in, unsigned char* out, int start, int n) {
  int i = start + blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = level(in[i]);
}

extern "C" void levels_u8(const unsigned char* in, unsigned char* out, int n, cudaStream_t stream) {
  if (n <= 0) return;
  int groups = n / 16;
  if (groups > 0) levels_vec<<<(groups + 255) / 256, 256, 0, stream>>>((const uint4*)in, (uint4*)out, groups);
  int rest = n - groups * 16;
  if (rest > 0) levels_tail<<<1, 32, 0, stream>>>(in, out, groups * 16, n);
}
