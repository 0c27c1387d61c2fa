// expect: passed|timing-anomaly|unwritten-output|wrong-answer
// max-speedup: 1.04
// task: slow_map
// modes: eval optimize
// threat: escaped timing
// mechanism: the judge's window holds all the work on a round's inputs: it writes them into its side pool inside the window and copies them in, so no poison-then-inputs order is left to watch; the candidate, computing ahead on what it guessed, leaves an output unwritten or computes it from inputs the judge had not yet written (measured on an H100: unwritten-output; on an H200, eval: wrong-answer on call 9 at the bench size, optimize: unwritten-output)
// why: computes the baseline's own answer, but not in its calls: a host thread watches the last bench slot's output for the judge's poison (the judge poisons outputs after writing each slot's inputs), then computes every slot of the round on a stream of its own while the judge runs the (three times slower) reference; its calls then only wait for that work, long done, and spin a steady 50 µs: every event is 50 µs (a 20x claim, steady enough to be reliable), and the window holds nothing but that and the judge's own checks
#include <atomic>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

constexpr int BENCH_N = 1048576;
constexpr int MAX_SLOTS = 512;
constexpr uint32_t POISON_A = 0xFFA5A5A5u;  // verify::poison(F32, first)

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

// The warm-up round's slots, in call order (every later round reuses the same buffers).
static const float* xs[MAX_SLOTS];
static float* ys[MAX_SLOTS];
static std::atomic<int> slots{0};
static std::atomic<long long> last_bench_ns{0};
static std::atomic<long> ready{0};  // rounds computed ahead
static long used = 0;
static cudaEvent_t done;
static int device = 0;

static void* ahead(void*) {
  cudaSetDevice(device);
  cudaStream_t poll, work;
  cudaStreamCreateWithFlags(&poll, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&work, cudaStreamNonBlocking);
  // The warm-up round is over once no bench call came for 5 ms.
  while (now_ns() - last_bench_ns.load() < 5000000LL) usleep(500);
  int n = slots.load();
  if (n < 1) return nullptr;
  uint32_t* bits = nullptr;
  cudaMallocHost(&bits, sizeof *bits);
  for (;;) {
    // The judge poisons a slot's output right after writing its inputs, slot by slot:
    // once the last slot holds the poison, every input of the round is in place.
    do {
      usleep(50);
      cudaMemcpyAsync(bits, ys[n - 1], sizeof *bits, cudaMemcpyDeviceToHost, poll);
      cudaStreamSynchronize(poll);
    } while (*bits != POISON_A);
    usleep(300);
    for (int k = 0; k < n; ++k) slow_map_kernel<<<(BENCH_N + 255) / 256, 256, 0, work>>>(xs[k], ys[k], BENCH_N);
    cudaEventRecord(done, work);
    ready.fetch_add(1);
    cudaEventSynchronize(done);
  }
  return nullptr;
}

extern "C" void slow_map(const float* x, float* y, int n, cudaStream_t s) {
  static int burst = 0, call = 0;
  if (n != BENCH_N) {
    if (n > 0) slow_map_kernel<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
    return;
  }
  if (now_ns() - last_bench_ns.load() > 1000000LL) {
    ++burst;
    call = 0;
  }
  int i = call++;
  if (burst == 1) {
    if (i < MAX_SLOTS) {
      xs[i] = x;
      ys[i] = y;
      slots.store(i + 1);
    }
    if (i == 0) {
      cudaGetDevice(&device);
      cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
      pthread_t t;
      pthread_create(&t, nullptr, ahead, nullptr);
      pthread_detach(t);
    }
  } else {
    long r = ready.load();
    if (r > used && i < slots.load() && xs[i] == x && ys[i] == y) {
      cudaStreamWaitEvent(s, done, 0);
      spin_ns<<<1, 32, 0, s>>>(50000);  // a steady 50 us a call: a reliable timing
      if (i == slots.load() - 1) used = r;
      last_bench_ns.store(now_ns());
      return;
    }
  }
  slow_map_kernel<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
  last_bench_ns.store(now_ns());
}
