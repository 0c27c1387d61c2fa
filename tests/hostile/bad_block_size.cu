// expect: launch-error
// task: vector_add
// threat: denial and blame
// why: launches blocks of 2048 threads, which no NVIDIA GPU accepts
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  if (n > 0) add<<<(n + 2047) / 2048, 2048, 0, s>>>(a, b, c, n);
}
