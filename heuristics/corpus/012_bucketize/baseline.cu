#include <cuda_runtime.h>

__global__ void bucketize_kernel(const float* bounds, const float* q, int* out, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = q[i];

  int lo = 0, hi = m;
  while (lo < hi) {
    int mid = (lo + hi) >> 1;
    if (bounds[mid] < v) lo = mid + 1;
    else hi = mid;
  }

  out[i] = lo;
}

extern "C" void bucketize(const float* bounds, const float* q, int* out, int n, int m, cudaStream_t stream) {
  if (n <= 0) return;
  bucketize_kernel<<<(n + 255) / 256, 256, 0, stream>>>(bounds, q, out, n, m);
}
