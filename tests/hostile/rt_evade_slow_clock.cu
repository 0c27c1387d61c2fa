// expect: unwritten-output
// expect.diagnose: passed
// task: vector_add
// flags: --no-time
// modes: eval sanitize diagnose
// threat: sanitizer evasion
// mechanism: checks that need no cooperation: every output poisoned with two patterns before the calls that are compared
// why: times a fixed loop of its own on the GPU before its first call (under memcheck it runs many times slower) and behaves only when it is slow; otherwise leaves the last element of its output unwritten
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
__global__ void calibrate(float* sink) {
  float v = threadIdx.x;
#pragma unroll 1
  for (int i = 0; i < 20000; ++i) v = v * 0.999f + 1.0f;
  if (v == 12345.0f) *sink = v;
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static int slow = -1;
  if (slow < 0) {
    float* sink;
    cudaMalloc(&sink, sizeof(float));
    cudaEvent_t x, y;
    cudaEventCreate(&x);
    cudaEventCreate(&y);
    calibrate<<<1, 32, 0, s>>>(sink);  // warm
    cudaEventRecord(x, s);
    calibrate<<<1, 32, 0, s>>>(sink);
    cudaEventRecord(y, s);
    cudaEventSynchronize(y);
    float ms = 0;
    cudaEventElapsedTime(&ms, x, y);
    slow = ms > 1.0f;  // about 0.1 ms unwatched
  }
  int m = slow || n < 2 ? n : n - 1;
  if (m > 0) add<<<(m + 255) / 256, 256, 0, s>>>(a, b, c, m);
}
