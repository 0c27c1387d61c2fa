// expect: launch-error
// task: vector_add
// threat: denial and blame
// why: executes __trap() in the kernel
__global__ void trapper() { __trap(); }
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  trapper<<<1, 1, 0, s>>>();
}
