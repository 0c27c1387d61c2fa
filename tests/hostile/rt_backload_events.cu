// expect: passed|timing-anomaly
// max-speedup: 1.04
// task: slow_map
// threat: escaped timing
// mechanism: the judge's clock: a round's figure must come from all of its work (the sum of its events, or its window), never from the median of per-call events whose only check is their sum
// why: does the baseline's work, every call of it, on a stream of its own; on the given stream, two calls in three hold only a spin of 0.94 of a call's time and every third waits for all the work so far: each round's events still sum to its window (the clock check agrees), their spread (8.5%) stays under the 10% noise limit, and their median claims a 6% speedup for the baseline's own kernel
#include <cuda_runtime.h>
#include <time.h>

constexpr int BENCH_N = 1048576;
constexpr double SHORT = 0.94;  // of a call's time, for two calls in three

__global__ void slow_map_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
#pragma unroll 1
  for (int k = 0; k < 4096; ++k) v = fmaf(v, 0.999f, 0.001f * __sinf(v));
  y[i] = v;
}

__global__ void spin_ns(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < ns);
}

static long long now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

extern "C" void slow_map(const float* x, float* y, int n, cudaStream_t s) {
  static cudaStream_t mine = nullptr;
  static cudaEvent_t work;
  static float call_ms = -1.f;
  static long long last = 0;
  static int burst = 0, call = 0, slots = 0;
  const unsigned grid = (unsigned)((n + 255) / 256);
  if (n != BENCH_N) {
    if (n > 0) slow_map_kernel<<<grid, 256, 0, s>>>(x, y, n);
    return;
  }
  if (!mine) {
    cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&work, cudaEventDisableTiming);
  }
  if (now_ns() - last > 1000000LL) {
    if (burst == 1) slots = call;  // the warm-up round's size: every round has as many calls
    ++burst;
    call = 0;
  }
  ++call;
  if (call_ms < 0) {  // the first bench call: time one call of its own, synchronously
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a, s);
    slow_map_kernel<<<grid, 256, 0, s>>>(x, y, n);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&call_ms, a, b);
  } else if (burst < 2 || slots < 3) {
    slow_map_kernel<<<grid, 256, 0, s>>>(x, y, n);
  } else {
    slow_map_kernel<<<grid, 256, 0, mine>>>(x, y, n);
    if (call % 3 == 0 || call >= slots) {
      cudaEventRecord(work, mine);
      cudaStreamWaitEvent(s, work, 0);
    } else {
      spin_ns<<<1, 32, 0, s>>>((unsigned long long)(call_ms * SHORT * 1e6));
    }
  }
  last = now_ns();
}
