// expect: illegal-address|launch-error
// task: vector_add
// flags: --no-time
// modes: eval
// threat: denial and blame
// mechanism: blame follows the load command: from then on every fault of the process is the library's, wherever and whenever it surfaces (here at a later call, in the worker's own context)
// why: computes the right answer and returns; 2 ms later a host thread launches a kernel that writes to address 16, so the fault surfaces in a later call, not the one that caused it
#include <cuda_runtime.h>
#include <thread>
#include <chrono>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
__global__ void wild(float* p) { *p = 1.0f; }
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static bool armed = false;
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  if (armed) return;
  armed = true;
  int device = 0;
  cudaGetDevice(&device);
  std::thread([device] {
    cudaSetDevice(device);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    cudaStream_t mine;
    cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking);
    wild<<<1, 1, 0, mine>>>((float*)16);
  }).detach();
}
