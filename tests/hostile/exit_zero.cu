// expect: process-exit
// task: vector_add
// threat: denial and blame
// why: calls exit(0) in the launcher
#include <stdlib.h>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  exit(0);
}
