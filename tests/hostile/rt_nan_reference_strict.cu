// expect: task-error
// task: nan_sqrt_strict
// flags: --no-time
// modes: eval
// threat: wrong but equal
// mechanism: a reference with non-finite outputs where the task allows none is a task error, found before any kernel is judged
// why: writes nothing at all, on a task whose reference writes NaN for every negative input and allows none: a kernel that never wrote the NaN would otherwise compare equal where the reference is wrong
#include <cuda_runtime.h>
extern "C" void nan_sqrt(const float* x, float* y, int n, cudaStream_t s) {
  (void)x;
  (void)y;
  (void)n;
  (void)s;
}
