// Baseline: a shared-memory tree reduction per block, one float atomicAdd per block.
#include <cuda_runtime.h>

#ifndef BLOCK
#define BLOCK 256
#endif

__global__ void reduce_blocks(const float* __restrict__ x, float* __restrict__ out, int n) {
  __shared__ float partial[BLOCK];
  float s = 0.f;
  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) s += x[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

extern "C" void reduce_sum(const float* x, float* out, int n, cudaStream_t stream) {
  cudaMemsetAsync(out, 0, sizeof(float), stream);
  if (n <= 0) return;
  int blocks = (n + BLOCK - 1) / BLOCK;
  if (blocks > 1024) blocks = 1024;
  reduce_blocks<<<blocks, BLOCK, 0, stream>>>(x, out, n);
}
