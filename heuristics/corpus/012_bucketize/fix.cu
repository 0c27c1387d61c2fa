#include <cuda_runtime.h>

#define MAX_SHARED_BOUNDS 12288  // 48 KB

__global__ void bucketize_shared(const float* __restrict__ bounds, const float* __restrict__ q, int* __restrict__ out, int n, int m) {
  extern __shared__ float sb[];
  for (int j = threadIdx.x; j < m; j += blockDim.x) sb[j] = bounds[j];
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float v = q[i];

  int lo = 0, hi = m;
  while (lo < hi) {
    int mid = (lo + hi) >> 1;
    if (sb[mid] < v) lo = mid + 1;
    else hi = mid;
  }

    out[i] = lo;
  }
}

__global__ void bucketize_global(const float* bounds, const float* q, int* out, int n, int m) {
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
  if (m <= MAX_SHARED_BOUNDS) {
    // Each block amortizes its copy of the boundaries over many queries.
    int blocks = (n + 255) / 256;
    if (blocks > 132 * 8) blocks = 132 * 8;
    bucketize_shared<<<blocks, 256, m * sizeof(float), stream>>>(bounds, q, out, n, m);
  } else {
    bucketize_global<<<(n + 255) / 256, 256, 0, stream>>>(bounds, q, out, n, m);
  }
}
