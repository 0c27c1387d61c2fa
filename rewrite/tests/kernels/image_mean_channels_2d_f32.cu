// entry: image_channel_average_f32
// arg: img in float channels*height*width
// arg: avg out float height*width
// arg: channels int 12
// arg: height int 2048
// arg: width int 2048
// tolerance: 1e-5 1e-6
// expect: applies reciprocal: divisions in loops as multiplications by a reciprocal computed once: `channel_average_kernel`: 1 division(s) by `12.0f` (1)
// The average of a fixed 12-channel stack per pixel on a 2-D grid (16 x 16 blocks): each
// channel's contribution is divided by the channel count inside the loop.
#include <cuda_runtime.h>

__global__ void channel_average_kernel(const float* img, float* avg, int channels, int height, int width) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (col >= width || row >= height) return;
  const size_t plane = (size_t)height * width;
  const size_t at = (size_t)row * width + col;
  float acc = 0.0f;
  for (int c = 0; c < channels; ++c) acc += img[c * plane + at] / 12.0f;
  avg[at] = acc;
}

extern "C" void image_channel_average_f32(const float* img, float* avg, int channels, int height, int width,
                                          cudaStream_t stream) {
  dim3 block(16, 16);
  dim3 grid((width + 15) / 16, (height + 15) / 16);
  channel_average_kernel<<<grid, block, 0, stream>>>(img, avg, channels, height, width);
}
