// expect: unwritten-output
// task: vector_add
// threat: wrong but equal
// why: writes the first half of the output
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  int m = n / 2 + (n == 1);
  if (m > 0) add<<<(m + 255) / 256, 256, 0, s>>>(a, b, c, m);
}
