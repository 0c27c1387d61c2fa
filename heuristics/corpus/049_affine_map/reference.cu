#include <cuda_runtime.h>

__global__ void affine_map_reference(const float* x, float* y, float a, float b, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = (float)((double)a * (double)x[i] + (double)b);
}

extern "C" void affine_map(const float* x, float* y, float a, float b, int n, cudaStream_t stream) {
  if (n <= 0) return;
  affine_map_reference<<<1024, 256, 0, stream>>>(x, y, a, b, n);
}
