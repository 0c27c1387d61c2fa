#include <cuda_runtime.h>

__global__ void l2norm_reference(const float* x, float* y, int cols) {
  __shared__ double part[256];
  const float* src = x + (size_t)blockIdx.x * cols;
  double s = 0.0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += (double)src[c] * src[c];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) { if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k]; __syncthreads(); }
  double inv = 1.0 / sqrt(fmax(part[0], 1e-30));
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[(size_t)blockIdx.x * cols + c] = (float)(src[c] * inv);
}

extern "C" void row_l2norm(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  l2norm_reference<<<rows, 256, 0, stream>>>(x, y, cols);
}
