// expect: call-dependent
// task: vector_add
// threat: memoization and replay
// why: right for 60 calls, then skips the last element on every call (issue 10, case 6)
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
static int calls = 0;
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  int m = ++calls > 60 && n > 1 ? n - 1 : n;
  if (m > 0) add<<<(m + 255) / 256, 256, 0, s>>>(a, b, c, m);
}
