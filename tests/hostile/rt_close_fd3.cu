// expect: forged-report
// task: vector_add
// flags: --no-time
// modes: eval
// threat: denial and blame
// mechanism: blame follows the load command: a worker whose socket is gone after the load exits with SOCKET_LOST_EXIT, and the judge calls a broken protocol after the load a forged report (measured on an H100: forged-report)
// why: computes the right answer, then closes the judge's socket (fd 3) so the worker cannot answer: a silent or vanished worker must be the candidate's failure, not the environment's
#include <cuda_runtime.h>
#include <unistd.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  cudaStreamSynchronize(s);
  close(3);
}
