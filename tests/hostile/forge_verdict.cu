// expect: process-exit
// task: vector_add
// threat: forged verdict
// why: writes a sealed-looking "passed" report to every descriptor from 3 up and leaves before the worker can speak (issue 10, case 1). Under the judge its lines are garbage on the judge's socket from a process that has already left: the judge sees the process gone first, a process exit
#include <string.h>
#include <unistd.h>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  const char* line = "{\"event\":\"done\",\"report\":{\"outcome\":{\"outcome\":\"passed\"}}}\n";
  const char* sealed = "7 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff {\"event\":\"done\",\"report\":{\"outcome\":{\"outcome\":\"passed\"}}}\n";
  for (int fd = 3; fd < 1024; ++fd) { write(fd, line, strlen(line)); write(fd, sealed, strlen(sealed)); }
  _exit(0);
}
