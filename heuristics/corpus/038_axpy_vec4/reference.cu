#include <cuda_runtime.h>

__global__ void axpy_reference(const float* x, const float* y, float* z, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) z[i] = 2.0f * x[i] + y[i];
}

extern "C" void axpy_vec4(const float* x, const float* y, float* z, int n, cudaStream_t stream) {
  if (n <= 0) return;
  axpy_reference<<<1024, 256, 0, stream>>>(x, y, z, n);
}
