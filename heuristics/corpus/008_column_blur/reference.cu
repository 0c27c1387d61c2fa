#include <cuda_runtime.h>

__constant__ float kW[17] = {1.0f / 65536, 16.0f / 65536, 120.0f / 65536, 560.0f / 65536, 1820.0f / 65536, 4368.0f / 65536, 8008.0f / 65536, 11440.0f / 65536, 12870.0f / 65536, 11440.0f / 65536, 8008.0f / 65536, 4368.0f / 65536, 1820.0f / 65536, 560.0f / 65536, 120.0f / 65536, 16.0f / 65536, 1.0f / 65536};

__global__ void column_blur_reference(const float* img, float* out, int height, int width) {
  size_t total = (size_t)height * width;
  for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < total; j += (size_t)gridDim.x * blockDim.x) {
    int y = (int)(j / width), x = (int)(j % width);
    float acc = 0.0f;
    for (int dy = -8; dy <= 8; dy++) {
      int yy = y + dy < 0 ? 0 : (y + dy >= height ? height - 1 : y + dy);
      acc = fmaf(kW[dy + 8], img[(size_t)yy * width + x], acc);
    }
    out[j] = acc;
  }
}

extern "C" void column_blur(const float* img, float* out, int height, int width, cudaStream_t stream) {
  if (height <= 0 || width <= 0) return;
  column_blur_reference<<<2048, 256, 0, stream>>>(img, out, height, width);
}
