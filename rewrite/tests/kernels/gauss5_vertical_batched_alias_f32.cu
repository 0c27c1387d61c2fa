// entry: gauss5_vertical
// arg: x in float N*H*W
// arg: y out float N*H*W
// arg: N int 4
// arg: H int 1080
// arg: W int 1920
// tolerance: 1e-5 1e-5
// expect: applies row-strip: `gauss5_vertical_kernel`: 8 rows per thread (grid y extent / 8); rows read at several offsets shared in registers across the strip: `plane_in` at rows row-2..row+2
// expect: declines vectorize
// expect: declines cooperative
// A 5-tap vertical Gaussian over a batch of images, blockIdx.z picking the image, zero
// outside it; each thread reads its image through a local pointer to the plane.
#include <cuda_runtime.h>

__constant__ float kTaps[5] = {0.0625f, 0.25f, 0.375f, 0.25f, 0.0625f};

__global__ void gauss5_vertical_kernel(const float* x, float* y, int H, int W) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (col >= W || row >= H) return;
  const size_t plane = (size_t)blockIdx.z * H * W;
  const float* plane_in = x + plane;
  float acc = 0.0f;
  for (int dy = -2; dy <= 2; ++dy) {
    const int r = row + dy;
    if (r < 0 || r >= H) continue;
    acc += kTaps[dy + 2] * plane_in[(size_t)r * W + col];
  }
  y[plane + (size_t)row * W + col] = acc;
}

extern "C" void gauss5_vertical(const float* x, float* y, int N, int H, int W, cudaStream_t stream) {
  if (N <= 0 || H <= 0 || W <= 0) return;
  const dim3 block(32, 8);
  const dim3 grid((W + block.x - 1) / block.x, (H + block.y - 1) / block.y, N);
  gauss5_vertical_kernel<<<grid, block, 0, stream>>>(x, y, H, W);
}
