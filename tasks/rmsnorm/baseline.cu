// Baseline: one block per row, sum of squares in float with a shared-memory tree, then
// a second pass that scales each element by rsqrt(mean square + eps) and the weight.
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif

__global__ void rmsnorm_rows(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ y,
                             int cols, float eps) {
  __shared__ float red[BLOCK];
  const __nv_bfloat16* row = x + (size_t)blockIdx.x * cols;
  __nv_bfloat16* out = y + (size_t)blockIdx.x * cols;
  float ss = 0.f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) {
    const float v = __bfloat162float(row[c]);
    ss += v * v;
  }
  red[threadIdx.x] = ss;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float scale = rsqrtf(red[0] / cols + eps);
  for (int c = threadIdx.x; c < cols; c += BLOCK)
    out[c] = __float2bfloat16(__bfloat162float(row[c]) * scale * __bfloat162float(w[c]));
}

extern "C" void rmsnorm(const __nv_bfloat16* x, const __nv_bfloat16* weight, __nv_bfloat16* y, int rows, int cols, float eps,
                        cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  rmsnorm_rows<<<rows, BLOCK, 0, stream>>>(x, weight, y, cols, eps);
}
