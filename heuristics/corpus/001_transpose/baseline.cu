#include <cuda_runtime.h>

__global__ void transpose_kernel(const float* input, float* output, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) output[(size_t)c * rows + r] = input[(size_t)r * cols + c];
}

extern "C" void transpose(const float* input, float* output, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  dim3 block(32, 8);
  dim3 grid((cols + 31) / 32, (rows + 7) / 8);
  transpose_kernel<<<grid, block, 0, stream>>>(input, output, rows, cols);
}
