// expect: process-exit
// task: vector_add
// flags: --no-time
// threat: forged verdict
// mechanism: the judge reads outputs from its own buffers and keeps talking to the process: a reply the library wrote and a process that then leaves is a process exit, however good the reply looked
// why: on its first call computes the right answer synchronously, writes a perfect `ran` frame on fd 3 itself, and leaves with _exit(0) before the worker can answer
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  cudaStreamSynchronize(s);
  const char* ran = "{\"reply\":\"ran\",\"event_ms\":[0.001]}";
  uint32_t len = (uint32_t)strlen(ran);
  write(3, &len, 4);
  write(3, ran, len);
  _exit(0);
}
