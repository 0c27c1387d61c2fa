#include <cuda_runtime.h>

__global__ void l2norm_wide(const float* __restrict__ x, float* __restrict__ y, int cols) {

  extern __shared__ float row[];
  __shared__ float part[32];
  const float* src = x + (size_t)blockIdx.x * cols;
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = src[c];
    row[c] = v;
    s += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < blockDim.x / 32; w++) total += part[w];
  float inv = rsqrtf(fmaxf(total, 1e-30f));
  float* dst = y + (size_t)blockIdx.x * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = row[c] * inv;

}

extern "C" void row_l2norm(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0 || cols > 12288) return;
  l2norm_wide<<<rows, 256, cols * sizeof(float), stream>>>(x, y, cols);
}
