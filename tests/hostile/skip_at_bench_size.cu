// expect: unwritten-output
// task: vector_add
// threat: memoization and replay
// why: skips the last 1000 elements at the bench size only; every check size is right (issue 10, case 6)
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  int m = n == 16777216 ? n - 1000 : n;
  if (m > 0) add<<<(m + 255) / 256, 256, 0, s>>>(a, b, c, m);
}
