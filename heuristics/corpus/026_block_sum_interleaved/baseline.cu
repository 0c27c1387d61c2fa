#include <cuda_runtime.h>

__global__ void block_sum_kernel(const float* x, float* out) {
  __shared__ float sdata[1024];
  unsigned int tid = threadIdx.x;
  sdata[tid] = x[(size_t)blockIdx.x * 1024 + tid];
  __syncthreads();
  for (unsigned int s = 1; s < blockDim.x; s *= 2) {
    if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}

extern "C" void block_sum_rows(const float* x, float* out, int rows, cudaStream_t stream) {
  if (rows <= 0) return;
  block_sum_kernel<<<rows, 1024, 0, stream>>>(x, out);
}
