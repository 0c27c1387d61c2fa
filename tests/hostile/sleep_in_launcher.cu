// expect: passed
// task: vector_add
// threat: escaped timing
// why: sleeps 2 ms in the launcher before launching (slow, not wrong: the GPU waits, the events count it)
#include <unistd.h>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  usleep(2000);
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
