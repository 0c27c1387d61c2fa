// expect: sanitizer-error
// task: vector_add
// threat: sanitizer evasion
// flags: --sanitize
// why: reads a scratch buffer it never initialized (the value read never changes the sum): only initcheck sees it (issue 10, case 7)
#include <cuda_runtime.h>
__global__ void add_scratch(const float* a, const float* b, const unsigned* scratch, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = scratch[i] == 0x13579bdfu ? 0.f : a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static unsigned* scratch = nullptr;
  static int cap = 0;
  if (n <= 0) return;
  if (n > cap) { if (scratch) cudaFree(scratch); cudaMalloc(&scratch, sizeof(unsigned) * n); cap = n; }
  add_scratch<<<(n + 255) / 256, 256, 0, s>>>(a, b, scratch, c, n);
}
