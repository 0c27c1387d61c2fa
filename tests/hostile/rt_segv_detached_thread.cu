// expect: crash
// task: vector_add
// flags: --no-time
// modes: eval
// threat: denial and blame
// mechanism: blame follows the load command: a process that dies after it, by any thread's signal, is the library's crash
// why: computes the right answer and returns; a detached thread it started on its first call dereferences NULL 5 ms later, between the judge's calls
#include <cuda_runtime.h>
#include <thread>
#include <chrono>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static bool armed = false;
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  if (armed) return;
  armed = true;
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    *(volatile int*)nullptr = 1;
  }).detach();
}
