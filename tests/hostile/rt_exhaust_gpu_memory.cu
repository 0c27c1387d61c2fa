// expect: passed
// task: vector_add
// modes: eval
// threat: denial and blame
// mechanism: the judge allocates every buffer it needs before a candidate's process exists, and that process's memory goes with it when it is killed; NVML's count of the process's memory over the repeated calls tells a leak from a one-time hoard
// why: on its first call takes every byte of GPU memory it can get (1 GiB at a time, then smaller) and keeps it (but 512 MiB its own context may need), then computes the right answer on every call: the judge's later work and the baseline's second phase must not suffer, and the verdict is the kernel's
#include <cuda_runtime.h>
#include <vector>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static bool hoarded = false;
  if (!hoarded) {
    hoarded = true;
    std::vector<std::pair<void*, size_t>> held;
    for (size_t chunk = 1ull << 30; chunk >= (1u << 20); chunk /= 2) {
      void* p;
      while (cudaMalloc(&p, chunk) == cudaSuccess) held.push_back({p, chunk});
    }
    cudaGetLastError();
    // Its own context still needs a little (events for longer rounds): 512 MiB back.
    size_t freed = 0;
    while (!held.empty() && freed < (512u << 20)) {
      cudaFree(held.back().first);
      freed += held.back().second;
      held.pop_back();
    }
    cudaGetLastError();
  }
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
