#include <cuda_runtime.h>

__global__ void bucketize_kernel(const float* bounds, const float* q, int* out, int n, int m) {
  // Persistent grid: each thread answers its queries one after another.
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float v = q[i];
    int lo = 0, hi = m;
    while (lo < hi) {
      int mid = (lo + hi) >> 1;
      if (bounds[mid] < v) lo = mid + 1;
      else hi = mid;
    }
    out[i] = lo;
  }
}

extern "C" void bucketize(const float* bounds, const float* q, int* out, int n, int m, cudaStream_t stream) {
  if (n <= 0) return;
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  bucketize_kernel<<<sms > 0 ? sms : 1, 64, 0, stream>>>(bounds, q, out, n, m);
}
