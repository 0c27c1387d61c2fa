#include <cuda_runtime.h>

#define THREADS 256
#define PER 32  // up to 8192 columns held in registers

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

__global__ void layernorm_regs(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                               float* __restrict__ y, int cols) {
  __shared__ float scratch[32];
  const float* row = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  float v[PER];
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < PER; k++) {
    int c = threadIdx.x + k * THREADS;
    v[k] = c < cols ? row[c] : 0.0f;
    s += v[k];
  }
  float mean = block_sum(s, scratch) / cols;
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < PER; k++) {
    int c = threadIdx.x + k * THREADS;
    float d = c < cols ? v[k] - mean : 0.0f;
    q += d * d;
  }
  float rstd = rsqrtf(block_sum(q, scratch) / cols + 1e-5f);
#pragma unroll
  for (int k = 0; k < PER; k++) {
    int c = threadIdx.x + k * THREADS;
    if (c < cols) out[c] = (v[k] - mean) * rstd * gamma[c] + beta[c];
  }
}

__global__ void layernorm_long(const float* x, const float* gamma, const float* beta, float* y, int cols) {
  __shared__ float scratch[32];
  const float* row = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
  float mean = block_sum(s, scratch) / cols;
  float q = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) { float d = row[c] - mean; q += d * d; }
  float rstd = rsqrtf(block_sum(q, scratch) / cols + 1e-5f);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = (row[c] - mean) * rstd * gamma[c] + beta[c];
}

extern "C" void layernorm_rows(const float* x, const float* gamma, const float* beta, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  if (cols <= PER * THREADS) layernorm_regs<<<rows, THREADS, 0, stream>>>(x, gamma, beta, y, cols);
  else layernorm_long<<<rows, THREADS, 0, stream>>>(x, gamma, beta, y, cols);
}
