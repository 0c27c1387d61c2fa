// expect: wrong-answer
// task: nan_sqrt
// flags: --no-time
// modes: eval
// threat: wrong but equal
// mechanism: NaN agrees only with NaN, element by element: a reference's NaN outputs (allowed by this task) do not make NaN right elsewhere
// why: writes NaN into every element of its output, on a task whose reference writes NaN for every negative input
#include <cuda_runtime.h>
__global__ void all_nan(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __int_as_float(0x7fc00000);
}
extern "C" void nan_sqrt(const float* x, float* y, int n, cudaStream_t s) {
  if (n > 0) all_nan<<<(n + 255) / 256, 256, 0, s>>>(y, n);
}
