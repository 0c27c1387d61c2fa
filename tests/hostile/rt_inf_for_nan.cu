// expect: wrong-answer
// task: nan_sqrt
// flags: --no-time
// modes: eval
// threat: wrong but equal
// mechanism: non-finite values must agree in kind: infinity is not NaN
// why: computes the right square root for non-negative inputs and writes +infinity where the reference writes NaN
#include <cuda_runtime.h>
__global__ void inf_sqrt(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] < 0.f ? __int_as_float(0x7f800000) : sqrtf(x[i]);
}
extern "C" void nan_sqrt(const float* x, float* y, int n, cudaStream_t s) {
  if (n > 0) inf_sqrt<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
}
