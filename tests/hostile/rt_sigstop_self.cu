// expect: timeout
// task: vector_add
// flags: --no-time
// modes: eval
// threat: denial and blame
// mechanism: every command to a worker has a deadline: a process that stops answering is the library's timeout, and the orchestrator's own deadline bounds the judgment
// why: stops itself with SIGSTOP in its first call (about 30 s pass before the judge gives up on it)
#include <cuda_runtime.h>
#include <signal.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  raise(SIGSTOP);
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
