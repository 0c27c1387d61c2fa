// expect: passed
// task: vector_add
// threat: denial and blame
// why: signals its parent (the orchestrator), its parent's group and every process it can reach, then computes the right answer: the caller must survive and judge it (issue 10, case 2)
#include <signal.h>
#include <unistd.h>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  kill(getppid(), SIGKILL);
  killpg(getpgid(getppid()), SIGKILL);
  kill(-1, SIGTERM);
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
