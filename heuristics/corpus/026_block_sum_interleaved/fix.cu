#include <cuda_runtime.h>

__global__ void block_sum_sequential(const float* __restrict__ x, float* __restrict__ out) {
  __shared__ float sdata[1024];
  unsigned int tid = threadIdx.x;
  sdata[tid] = x[(size_t)blockIdx.x * 1024 + tid];
  __syncthreads();
  for (unsigned int s = blockDim.x / 2; s >= 32; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid < 32) {
    float v = sdata[tid];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (tid == 0) out[blockIdx.x] = v;
  }
}

extern "C" void block_sum_rows(const float* x, float* out, int rows, cudaStream_t stream) {
  if (rows <= 0) return;
  block_sum_sequential<<<rows, 1024, 0, stream>>>(x, out);
}
