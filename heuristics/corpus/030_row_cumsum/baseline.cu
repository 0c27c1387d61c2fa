#include <cuda_runtime.h>

__global__ void cumsum_kernel(const float* x, float* y) {
  __shared__ float buf[1024];
  int t = threadIdx.x;
  size_t base = (size_t)blockIdx.x * 1024;
  buf[t] = x[base + t];
  __syncthreads();
  for (int offset = 1; offset < 1024; offset *= 2) {
    float add = t >= offset ? buf[t - offset] : 0.0f;
    __syncthreads();
    buf[t] += add;
    __syncthreads();
  }
  y[base + t] = buf[t];
}

extern "C" void row_cumsum(const float* x, float* y, int rows, cudaStream_t stream) {
  if (rows <= 0) return;
  cumsum_kernel<<<rows, 1024, 0, stream>>>(x, y);
}
