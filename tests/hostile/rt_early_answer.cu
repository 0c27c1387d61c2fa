// expect: wrong-answer
// task: vector_add
// flags: --no-time
// threat: escaped timing
// mechanism: the judge reads every output at the end of its own window, after the worker says the calls are done: what a library finishes later is not what is judged
// why: answers at once with a cheap approximation (c = a) and has a host thread, woken by the call, write the right sum 2 ms later on a stream of its own: the early answer is what the judge compares
#include <condition_variable>
#include <cuda_runtime.h>
#include <mutex>
#include <thread>

__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

struct Job {
  const float* a;
  const float* b;
  float* c;
  int n;
};
static std::mutex m;
static std::condition_variable cv;
static Job pending;
static bool has_job = false;

static void finisher() {
  cudaStream_t mine;
  cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking);
  for (;;) {
    Job j;
    {
      std::unique_lock<std::mutex> lock(m);
      cv.wait(lock, [] { return has_job; });
      j = pending;
      has_job = false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    add<<<(j.n + 255) / 256, 256, 0, mine>>>(j.a, j.b, j.c, j.n);
  }
}

extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static bool started = false;
  if (!started) {
    started = true;
    int device = 0;
    cudaGetDevice(&device);
    std::thread([device] {
      cudaSetDevice(device);
      finisher();
    }).detach();
  }
  if (n <= 0) return;
  cudaMemcpyAsync(c, a, sizeof(float) * n, cudaMemcpyDeviceToDevice, s);
  std::lock_guard<std::mutex> lock(m);
  pending = Job{a, b, c, n};
  has_job = true;
  cv.notify_one();
}
