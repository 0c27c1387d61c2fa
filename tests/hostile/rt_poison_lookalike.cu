// expect: wrong-answer
// task: vector_add
// flags: --no-time
// modes: eval
// threat: wrong but equal
// mechanism: poison is a NaN pattern the judge writes before a call; a kernel that writes it itself is judged on its values (NaN where the reference is finite), never taken for the judge's own poison
// why: writes the judge's first poison pattern (0xFFA5A5A5, a NaN) into every element of its output
#include <cuda_runtime.h>
__global__ void poison(float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = __int_as_float((int)0xFFA5A5A5u);
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  if (n > 0) poison<<<(n + 255) / 256, 256, 0, s>>>(c, n);
}
