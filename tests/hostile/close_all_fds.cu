// expect: process-exit|forged-report
// task: vector_add
// threat: forged verdict
// why: closes every file descriptor, the report channel included. Under the judge the worker can no longer answer and leaves (process-exit), unless a descriptor the driver opens afterwards takes fd 3 first (forged-report)
#include <unistd.h>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  for (int fd = 0; fd < 4096; ++fd) close(fd);
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
