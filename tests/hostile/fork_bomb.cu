// expect: passed
// task: vector_add
// threat: escape to the host
// why: tries to fork (by raw syscall: the import check refuses fork itself) and to start a new session, then computes the right answer
#include <unistd.h>
#include <sys/syscall.h>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  for (int i = 0; i < 64; ++i) if (syscall(SYS_fork) == 0) { for (;;) {} }
  setsid();
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
