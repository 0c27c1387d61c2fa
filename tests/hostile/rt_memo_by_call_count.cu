// expect: wrong-answer
// task: vector_add
// threat: memoization and replay
// mechanism: every timed call runs on an input set of its own and every timed output is verified: replaying an earlier call's output is wrong wherever the inputs changed
// why: right for its first 100 calls (the check's 30 and its 48 repeats among them), then on every second call copies the previous call's output instead of computing: the repeated check calls could not tell (same inputs), the bench rounds can
#include <cuda_runtime.h>

__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static long calls = 0;
  static const float* last_c = nullptr;
  static int last_n = 0;
  if (n <= 0) return;
  ++calls;
  if (calls > 100 && calls % 2 == 0 && last_c && last_n == n && last_c != c) {
    cudaMemcpyAsync(c, last_c, sizeof(float) * (size_t)n, cudaMemcpyDeviceToDevice, s);
  } else {
    add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  }
  last_c = c;
  last_n = n;
}
