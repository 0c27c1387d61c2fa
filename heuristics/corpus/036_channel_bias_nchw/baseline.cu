#include <cuda_runtime.h>

__global__ void bias_kernel(const float* x, const float* bias, float* y, size_t total, size_t channels, size_t spatial) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= total) return;
  size_t c = (i / spatial) % channels;
  y[i] = x[i] + bias[c];
}

extern "C" void channel_bias_nchw(const float* x, const float* bias, float* y, int batch, int channels, int spatial, cudaStream_t stream) {
  size_t total = (size_t)batch * channels * spatial;
  if (total == 0) return;
  bias_kernel<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(x, bias, y, total, channels, spatial);
}
