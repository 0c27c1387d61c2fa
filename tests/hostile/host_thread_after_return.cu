// expect: unwritten-output
// task: vector_add
// threat: escaped timing
// why: returns at once and lets a host thread launch the work 20 ms later
#include <thread>
#include <chrono>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  std::thread([=] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n); }).detach();
}
