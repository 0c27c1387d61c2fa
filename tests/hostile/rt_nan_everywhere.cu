// expect: wrong-answer|stale-output
// task: nan_sqrt
// flags: --no-time
// modes: eval
// threat: wrong but equal
// mechanism: NaN agrees only with NaN, element by element: a reference's NaN outputs (allowed by this task) do not make NaN right elsewhere. Which class names the rejection depends on the run's fresh seeds: where the first seed's input at n = 1 is negative, the all-NaN output is right there, and the next seed's identical output is caught as the earlier input's result (stale-output, seen on an H200); otherwise as a wrong answer
// why: writes NaN into every element of its output, on a task whose reference writes NaN for every negative input
#include <cuda_runtime.h>
__global__ void all_nan(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __int_as_float(0x7fc00000);
}
extern "C" void nan_sqrt(const float* x, float* y, int n, cudaStream_t s) {
  if (n > 0) all_nan<<<(n + 255) / 256, 256, 0, s>>>(y, n);
}
