#include <cuda_runtime.h>

__device__ float refine(float v) {
  // Newton iterations for the real cube root of v, from a rough start.
  float r = v >= 0.0f ? 1.0f : -1.0f;
  for (int k = 0; k < 48; k++) r = r - (r * r * r - v) / (3.0f * r * r);
  return r;
}

__global__ void refine_compact(const float* __restrict__ x, const unsigned char* __restrict__ mask, float* __restrict__ y, int n) {
  __shared__ int queue[256];
  __shared__ int count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    if (mask[i] != 0) y[i] = x[i];
    else queue[atomicAdd(&count, 1)] = i;
  }
  __syncthreads();
  if (threadIdx.x < count) {
    int j = queue[threadIdx.x];
    y[j] = refine(x[j]);
  }
}

extern "C" void masked_refine(const float* x, const unsigned char* mask, float* y, int n, cudaStream_t stream) {
  if (n <= 0) return;
  refine_compact<<<(n + 255) / 256, 256, 0, stream>>>(x, mask, y, n);
}
