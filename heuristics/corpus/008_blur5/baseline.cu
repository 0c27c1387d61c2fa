#include <cuda_runtime.h>

__constant__ float kW[5] = {1.0f / 16, 4.0f / 16, 6.0f / 16, 4.0f / 16, 1.0f / 16};

__global__ void blur_kernel(const float* img, float* out, int height, int width) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= width || y >= height) return;
  float acc = 0.0f;
  for (int dy = -2; dy <= 2; dy++) {
    int yy = min(max(y + dy, 0), height - 1);
    for (int dx = -2; dx <= 2; dx++) {
      int xx = min(max(x + dx, 0), width - 1);
      acc += kW[dy + 2] * kW[dx + 2] * img[(size_t)yy * width + xx];
    }
  }
  out[(size_t)y * width + x] = acc;
}

extern "C" void blur5(const float* img, float* out, int height, int width, cudaStream_t stream) {
  if (height <= 0 || width <= 0) return;
  dim3 block(32, 8);
  dim3 grid((width + 31) / 32, (height + 7) / 8);
  blur_kernel<<<grid, block, 0, stream>>>(img, out, height, width);
}
