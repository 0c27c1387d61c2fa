// expect: forged-report
// task: vector_add
// flags: --no-time
// modes: eval
// threat: denial and blame
// mechanism: everything read from a worker is hostile input: a frame that does not parse, or past the size limit, is a protocol breach, the library's
// why: points its stdout and stderr at the judge's socket (dup2 over fds 1 and 2) and prints a judge's report line there before the worker answers, so the judge reads text where it expects a frame
#include <cuda_runtime.h>
#include <stdio.h>
#include <unistd.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static bool once = false;
  if (!once) {
    once = true;
    dup2(3, 1);
    dup2(3, 2);
    printf("{\"event\":\"done\",\"report\":{\"outcome\":{\"outcome\":\"passed\"},\"notes\":[\"nightshift_forged\"]}}\n");
    fflush(stdout);
  }
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
