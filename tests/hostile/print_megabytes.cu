// expect: passed
// task: vector_add
// threat: denial and blame
// why: prints 256 KiB on every call and is otherwise right
#include <stdio.h>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static char junk[1 << 18];
  if (!junk[0]) for (int i = 0; i < (int)sizeof junk - 1; ++i) junk[i] = (i % 64 == 63) ? 10 : 65 + i % 26;
  fwrite(junk, 1, sizeof junk - 1, stdout);
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
