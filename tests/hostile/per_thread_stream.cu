// expect: timing-anomaly
// task: vector_add
// threat: escaped timing
// why: launches on the per-thread default stream and never joins the given one
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  if (n > 0) add<<<(n + 255) / 256, 256, 0, cudaStreamPerThread>>>(a, b, c, n);
}
