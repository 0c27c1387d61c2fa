#include <cuda_runtime.h>

__global__ void bucketize_reference(const float* bounds, const float* q, int* out, int n, int m) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float v = q[i];
    int lo = 0, hi = m;  // first index whose bound is >= v
    while (hi - lo > 0) {
      int half = (hi - lo) / 2;
      if (bounds[lo + half] < v) lo = lo + half + 1;
      else hi = lo + half;
    }
    out[i] = lo;
  }
}

extern "C" void bucketize(const float* bounds, const float* q, int* out, int n, int m, cudaStream_t stream) {
  if (n <= 0) return;
  bucketize_reference<<<1024, 256, 0, stream>>>(bounds, q, out, n, m);
}
