#include <cuda_runtime.h>

#define R 8

__constant__ float kW[17] = {1.0f / 65536, 16.0f / 65536, 120.0f / 65536, 560.0f / 65536, 1820.0f / 65536, 4368.0f / 65536, 8008.0f / 65536, 11440.0f / 65536, 12870.0f / 65536, 11440.0f / 65536, 8008.0f / 65536, 4368.0f / 65536, 1820.0f / 65536, 560.0f / 65536, 120.0f / 65536, 16.0f / 65536, 1.0f / 65536};

// One thread per output pixel, one image row per block.
__global__ void column_blur_kernel(const float* img, float* out, int height, int width) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y;
  if (x >= width) return;
  float acc = 0.0f;
#pragma unroll
  for (int dy = -R; dy <= R; dy++) {
    int yy = min(max(y + dy, 0), height - 1);
    acc = fmaf(kW[dy + R], img[(size_t)yy * width + x], acc);
  }
  out[(size_t)y * width + x] = acc;
}

extern "C" void column_blur(const float* img, float* out, int height, int width, cudaStream_t stream) {
  if (height <= 0 || width <= 0) return;
  dim3 grid((width + 255) / 256, height);
  column_blur_kernel<<<grid, 256, 0, stream>>>(img, out, height, width);
}
