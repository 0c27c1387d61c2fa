#include <cuda_runtime.h>

__global__ void cumsum_shuffle(const float* __restrict__ x, float* __restrict__ y) {
  __shared__ float warp_total[32];
  int t = threadIdx.x, lane = t % 32, warp = t / 32;
  size_t base = (size_t)blockIdx.x * 1024;
  float v = x[base + t];
  for (int o = 1; o < 32; o *= 2) {
    float up = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += up;
  }
  if (lane == 31) warp_total[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = warp_total[lane];
    for (int o = 1; o < 32; o *= 2) {
      float up = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += up;
    }
    warp_total[lane] = w;
  }
  __syncthreads();
  if (warp > 0) v += warp_total[warp - 1];
  y[base + t] = v;
}

extern "C" void row_cumsum(const float* x, float* y, int rows, cudaStream_t stream) {
  if (rows <= 0) return;
  cumsum_shuffle<<<rows, 1024, 0, stream>>>(x, y);
}
