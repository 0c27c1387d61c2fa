#include <cuda_runtime.h>

__global__ void dequant_vec(const uint4* __restrict__ q, const float* __restrict__ scale, float4* __restrict__ y, int chunks) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= chunks) return;
  float s = scale[t / 8];  // 8 chunks of 16 codes per group of 128
  uint4 v = q[t];
  const unsigned char* b = reinterpret_cast<const unsigned char*>(&v);
#pragma unroll
  for (int k = 0; k < 4; k++)
    y[4 * t + k] = make_float4((b[4 * k] - 128) * s, (b[4 * k + 1] - 128) * s, (b[4 * k + 2] - 128) * s, (b[4 * k + 3] - 128) * s);
}

extern "C" void dequant_u8(const unsigned char* q, const float* scale, float* y, int groups, cudaStream_t stream) {
  if (groups <= 0) return;
  int chunks = groups * 8;
  dequant_vec<<<(chunks + 255) / 256, 256, 0, stream>>>((const uint4*)q, scale, (float4*)y, chunks);
}
