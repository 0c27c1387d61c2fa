// expect: passed|timing-anomaly
// max-speedup: 1.04
// task: vector_add
// threat: slowed baseline
// mechanism: the baseline is timed only while no candidate process exists: the worker is killed (SIGKILL, never asked to quit), so no thread of the library outlives its last round
// why: the baseline's own kernel; right after its last timed round a host thread starts launching 1 ms kernels on every SM back to back, for 5 s, and ignores any request to stop: the baseline's second phase must not see them
#include <cuda_runtime.h>
#include <signal.h>
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
    // Stopping requests are for others.
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    int device = 0;
    cudaGetDevice(&device);
    std::thread([device, s] {
      cudaSetDevice(device);
      while (cudaStreamQuery(s) == cudaErrorNotReady) usleep(20);
      usleep(300);
      cudaStream_t mine;
      cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking);
      int sms = 132;
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      long long until = now_ns() + 5000000000LL;
      while (now_ns() < until) {
        hog<<<sms * 8, 256, 0, mine>>>(1000000ULL);
        cudaStreamSynchronize(mine);
      }
    }).detach();
  }
}
