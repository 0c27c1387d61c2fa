// Trusted reference: a grid-stride loop with a fixed grid, as simple as it gets.
#include <cuda_runtime.h>

__global__ void vector_add_reference(const float* a, const float* b, float* c, int n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    c[i] = a[i] + b[i];
}

extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t stream) {
  if (n <= 0) return;
  vector_add_reference<<<1024, 256, 0, stream>>>(a, b, c, n);
}
