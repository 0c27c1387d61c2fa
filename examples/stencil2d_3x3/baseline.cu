// 3x3 stencil over a batch of fp32 images (a blur, sharpen, Laplacian or learned filter
// given by its nine weights), zero padding at the borders:
//   y[n, r, c] = sum_{dy, dx in -1..1} w[3 * (dy + 1) + (dx + 1)] * x[n, r + dy, c + dx]
// x and y are N x H x W, contiguous. A 2-D launch of 16 x 16 thread blocks, one output
// pixel per thread, blockIdx.z picks the image; neighbours outside the image are skipped.
#include <cuda_runtime.h>

__global__ void stencil2d_3x3_kernel(const float* x, const float* w, float* y, int H, int W) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (col >= W || row >= H) return;
  const size_t plane = (size_t)blockIdx.z * H * W;
  const float* img = x + plane;

  float acc = 0.0f;
  for (int dy = -1; dy <= 1; ++dy) {
    const int r = row + dy;
    if (r < 0 || r >= H) continue;
    for (int dx = -1; dx <= 1; ++dx) {
      const int c = col + dx;
      if (c < 0 || c >= W) continue;
      acc += w[(dy + 1) * 3 + (dx + 1)] * img[(size_t)r * W + c];
    }
  }
  y[plane + (size_t)row * W + col] = acc;
}

extern "C" void stencil2d_3x3(const float* x, const float* w, float* y, int N, int H, int W,
                              cudaStream_t stream) {
  if (N <= 0 || H <= 0 || W <= 0) return;
  const dim3 block(16, 16);
  const dim3 grid((W + block.x - 1) / block.x, (H + block.y - 1) / block.y, N);
  stencil2d_3x3_kernel<<<grid, block, 0, stream>>>(x, w, y, H, W);
}
