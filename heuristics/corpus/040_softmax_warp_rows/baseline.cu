#include <cuda_runtime.h>

__global__ void softmax_warp(const float4* __restrict__ x, float4* __restrict__ y, int rows) {
  int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float4* src = x + (size_t)row * 256;
  float4 v[8];
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < 8; k++) {
    v[k] = src[lane + 32 * k];
    m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
  }
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; k++) {
    v[k].x = __expf(v[k].x - m); v[k].y = __expf(v[k].y - m); v[k].z = __expf(v[k].z - m); v[k].w = __expf(v[k].w - m);
    s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  float inv = 1.0f / s;
  float4* dst = y + (size_t)row * 256;
#pragma unroll
  for (int k = 0; k < 8; k++) dst[lane + 32 * k] = make_float4(v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv);
}

extern "C" void softmax_rows(const float* x, float* y, int rows, cudaStream_t stream) {
  if (rows <= 0) return;
  softmax_warp<<<(rows + 7) / 8, 256, 0, stream>>>((const float4*)x, (float4*)y, rows);
}
