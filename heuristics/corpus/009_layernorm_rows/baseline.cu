#include <cuda_runtime.h>

__device__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < blockDim.x / 32; w++) total += scratch[w];
  return total;
}

__global__ void layernorm_kernel(const float* x, const float* gamma, const float* beta, float* y, int cols) {
  __shared__ float scratch[32];
  const float* row = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
  float mean = block_sum(s, scratch) / cols;
  float v = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float d = row[c] - mean;
    v += d * d;
  }
  float rstd = rsqrtf(block_sum(v, scratch) / cols + 1e-5f);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = (row[c] - mean) * rstd * gamma[c] + beta[c];
}

extern "C" void layernorm_rows(const float* x, const float* gamma, const float* beta, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  layernorm_kernel<<<rows, 256, 0, stream>>>(x, gamma, beta, y, cols);
}
