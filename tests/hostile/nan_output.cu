// expect: wrong-answer
// task: vector_add
// threat: wrong but equal
// why: writes NaN into the middle element
__global__ void poison_mid(float* c, int n) { c[n / 2] = __int_as_float(0x7fc00000); }
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  if (n > 0) poison_mid<<<1, 1, 0, s>>>(c, n);
}
