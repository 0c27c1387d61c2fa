// expect: unwritten-output
// task: vector_add
// threat: wrong but equal
// why: does nothing at all
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  (void)a; (void)b; (void)c; (void)n; (void)s;
}
