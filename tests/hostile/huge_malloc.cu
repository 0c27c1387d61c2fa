// expect: launch-error
// task: vector_add
// threat: denial and blame
// why: asks for 4 TiB of device memory and gives up when refused
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  float* p = nullptr;
  if (cudaMalloc(&p, 1ull << 42) != cudaSuccess) return;
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
