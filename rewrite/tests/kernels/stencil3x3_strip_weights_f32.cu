// entry: stencil3x3_strip
// arg: x in float N*H*W
// arg: w in float 9
// arg: y out float N*H*W
// arg: N int 4
// arg: H int 2160
// arg: W int 3840
// tolerance: 1e-5 1e-5
// expect: applies register-table: `stencil3x3_strip_kernel`: `w` elements 0..9 in registers for 1 read(s)
// expect: declines grid-stride
#include <cuda_runtime.h>

// A 3x3 stencil with zero borders whose thread already walks a strip of 4 rows down its
// column (as `row-strip` writes it): the nine weights are read again for every row, each
// behind the border checks, so the compiler loads them once per row.
__global__ void stencil3x3_strip_kernel(const float* x, const float* w, float* y, int H, int W) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row0 = (blockIdx.y * blockDim.y + threadIdx.y) * 4;
  const float* img = x + (size_t)blockIdx.z * H * W;
  for (int s = 0; s < 4; ++s) {
    const int row = row0 + s;
    if (col >= W || row >= H) continue;
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
    y[(size_t)blockIdx.z * H * W + (size_t)row * W + col] = acc;
  }
}

extern "C" void stencil3x3_strip(const float* x, const float* w, float* y, int N, int H, int W,
                                 cudaStream_t stream) {
  const dim3 block(32, 8);
  const dim3 grid((W + 31) / 32, (H + 31) / 32, N);
  stencil3x3_strip_kernel<<<grid, block, 0, stream>>>(x, w, y, H, W);
}
