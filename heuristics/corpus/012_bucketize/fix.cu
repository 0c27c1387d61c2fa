#include <cuda_runtime.h>

#define BATCH 8

// Each thread advances BATCH queries' searches together: with a fixed-length (branchless)
// lower_bound every search takes the same steps, so the BATCH probes of a step are
// independent loads in flight at once instead of one.
__global__ void bucketize_batched(const float* __restrict__ bounds, const float* __restrict__ q, int* __restrict__ out, int n, int m) {
  int stride = gridDim.x * blockDim.x;
  for (int i0 = blockIdx.x * blockDim.x + threadIdx.x; i0 < n; i0 += stride * BATCH) {
    float v[BATCH];
    int base[BATCH];
#pragma unroll
    for (int b = 0; b < BATCH; b++) {
      int i = i0 + b * stride;
      v[b] = i < n ? q[i] : 0.0f;
      base[b] = 0;
    }
    int len = m;
    while (len > 1) {
      int half = len >> 1;
#pragma unroll
      for (int b = 0; b < BATCH; b++) base[b] = bounds[base[b] + half] < v[b] ? base[b] + half : base[b];
      len -= half;
    }
#pragma unroll
    for (int b = 0; b < BATCH; b++) {
      int i = i0 + b * stride;
      if (i < n) out[i] = m > 0 ? base[b] + (bounds[base[b]] < v[b]) : 0;
    }
  }
}

extern "C" void bucketize(const float* bounds, const float* q, int* out, int n, int m, cudaStream_t stream) {
  if (n <= 0) return;
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  bucketize_batched<<<sms > 0 ? sms : 1, 64, 0, stream>>>(bounds, q, out, n, m);
}
