// expect: timing-anomaly|passed
// max-speedup: 1.1
// task: vector_add
// threat: escaped timing
// mechanism: the judge's window runs to its own check of every output, so work outside the events lands in it: a window that holds far more than the events is a timing anomaly (a little more, and the window's figure is used)
// why: at the bench size does the whole sum on a private stream it never joins, and fills the given stream's events with a spin of a tenth of a call's time: the events claim a 10x speedup, the window holds the work
#include <cuda_runtime.h>

__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__global__ void spin_ns(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < ns);
}

extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static cudaStream_t mine = nullptr;
  static float call_ms = -1.f;
  if (n <= 0) return;
  if (n < 16777216) {
    add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
    return;
  }
  if (call_ms < 0) {  // the first bench call: time one honest call, synchronously
    cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking);
    cudaEvent_t x, y;
    cudaEventCreate(&x);
    cudaEventCreate(&y);
    cudaEventRecord(x, s);
    add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
    cudaEventRecord(y, s);
    cudaEventSynchronize(y);
    cudaEventElapsedTime(&call_ms, x, y);
    return;
  }
  add<<<(n + 255) / 256, 256, 0, mine>>>(a, b, c, n);
  spin_ns<<<1, 32, 0, s>>>((unsigned long long)(call_ms * 0.1 * 1e6));
}
