// expect: passed|timing-anomaly
// max-speedup: 1.04
// task: vector_add
// threat: slowed baseline
// mechanism: the baseline is timed only while no candidate process exists: the candidate's worker is killed and reaped (its GPU context torn down with it) before the baseline's second timing phase
// why: the baseline's own kernel; right after its last timed round (the sixth round of calls at the bench size: one warm-up and five timed), once its stream is idle, launches a kernel on every SM that spins for 3 s, to slow the baseline's calls that follow it: the speedup must stay the baseline's against itself
#include <cuda_runtime.h>
#include <thread>
#include <time.h>
#include <unistd.h>

__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__global__ void hog(unsigned long long ns) {
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

extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static long long last = 0;
  static int burst = 0, call = 0, slots = 0;
  if (n <= 0) return;
  add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  if (n != 16777216) return;
  if (now_ns() - last > 1000000LL) {
    if (burst == 1) slots = call;
    ++burst;
    call = 0;
  }
  ++call;
  last = now_ns();
  if (burst == 6 && call == slots) {
    int device = 0;
    cudaGetDevice(&device);
    std::thread([device, s] {
      cudaSetDevice(device);
      while (cudaStreamQuery(s) == cudaErrorNotReady) usleep(20);
      usleep(300);  // the worker has answered the round by now
      cudaStream_t mine;
      cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking);
      int sms = 132;
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      hog<<<sms * 8, 256, 0, mine>>>(3000000000ULL);
    }).detach();
  }
}
