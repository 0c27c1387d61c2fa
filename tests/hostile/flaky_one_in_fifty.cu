// expect: nondeterminism
// task: vector_add
// threat: memoization and replay
// why: is wrong in one element on every fiftieth call
__global__ void nudge(float* c) { c[0] += 1.0f; }
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static int calls = 0;
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  if (n > 0 && ++calls % 50 == 0) nudge<<<1, 1, 0, s>>>(c);
}
