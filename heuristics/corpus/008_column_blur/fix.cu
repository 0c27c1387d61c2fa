#include <cuda_runtime.h>

#define R 8
#define TX 32
#define TY 64  // output rows per block
#define BY 8   // thread rows per block

__constant__ float kW[17] = {1.0f / 65536, 16.0f / 65536, 120.0f / 65536, 560.0f / 65536, 1820.0f / 65536, 4368.0f / 65536, 8008.0f / 65536, 11440.0f / 65536, 12870.0f / 65536, 11440.0f / 65536, 8008.0f / 65536, 4368.0f / 65536, 1820.0f / 65536, 560.0f / 65536, 120.0f / 65536, 16.0f / 65536, 1.0f / 65536};

// A block stages a 32-wide strip of TY + 2R rows in shared memory once, then every
// output reads its 17 taps from there: each input row is fetched (TY + 2R) / TY times
// instead of 17 times.
__global__ void column_blur_tiled(const float* __restrict__ img, float* __restrict__ out, int height, int width) {
  __shared__ float tile[TY + 2 * R][TX];
  int x = blockIdx.x * TX + threadIdx.x;
  int y0 = blockIdx.y * TY;
  int xc = min(x, width - 1);
  for (int ty = threadIdx.y; ty < TY + 2 * R; ty += BY) {
    int yy = min(max(y0 - R + ty, 0), height - 1);
    tile[ty][threadIdx.x] = img[(size_t)yy * width + xc];
  }
  __syncthreads();
  if (x >= width) return;
  for (int ty = threadIdx.y; ty < TY; ty += BY) {
    int y = y0 + ty;
    if (y >= height) break;
    float acc = 0.0f;
#pragma unroll
    for (int dy = -R; dy <= R; dy++) acc = fmaf(kW[dy + R], tile[ty + R + dy][threadIdx.x], acc);
    out[(size_t)y * width + x] = acc;
  }
}

extern "C" void column_blur(const float* img, float* out, int height, int width, cudaStream_t stream) {
  if (height <= 0 || width <= 0) return;
  dim3 block(TX, BY);
  dim3 grid((width + TX - 1) / TX, (height + TY - 1) / TY);
  column_blur_tiled<<<grid, block, 0, stream>>>(img, out, height, width);
}
