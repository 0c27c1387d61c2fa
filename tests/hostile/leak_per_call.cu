// expect: resource-leak
// task: vector_add
// threat: denial and blame
// why: allocates 16 MiB of device memory on every call and never frees it
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  float* p = nullptr;
  cudaMalloc(&p, 16 << 20);
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
