#include <cuda_runtime.h>

__constant__ float kW[5] = {1.0f / 16, 4.0f / 16, 6.0f / 16, 4.0f / 16, 1.0f / 16};

#define BX 32
#define BY 8
#define R 2

__global__ void blur_tiled(const float* __restrict__ img, float* __restrict__ out, int height, int width) {
  __shared__ float tile[BY + 2 * R][BX + 2 * R];
  int x0 = blockIdx.x * BX - R, y0 = blockIdx.y * BY - R;
  for (int ty = threadIdx.y; ty < BY + 2 * R; ty += BY) {
    int yy = min(max(y0 + ty, 0), height - 1);
    for (int tx = threadIdx.x; tx < BX + 2 * R; tx += BX) {
      int xx = min(max(x0 + tx, 0), width - 1);
      tile[ty][tx] = img[(size_t)yy * width + xx];
    }
  }
  __syncthreads();
  int x = blockIdx.x * BX + threadIdx.x, y = blockIdx.y * BY + threadIdx.y;
  if (x >= width || y >= height) return;
  float acc = 0.0f;
  for (int dy = -2; dy <= 2; dy++)
    for (int dx = -2; dx <= 2; dx++)
      acc += kW[dy + 2] * kW[dx + 2] * tile[threadIdx.y + R + dy][threadIdx.x + R + dx];
  out[(size_t)y * width + x] = acc;
}

extern "C" void blur5(const float* img, float* out, int height, int width, cudaStream_t stream) {
  if (height <= 0 || width <= 0) return;
  dim3 block(BX, BY);
  dim3 grid((width + BX - 1) / BX, (height + BY - 1) / BY);
  blur_tiled<<<grid, block, 0, stream>>>(img, out, height, width);
}
