// entry: running_mean_f32
// arg: x in float rows*cols
// arg: y out float rows*cols
// arg: rows int 65536
// arg: cols int 1024
// tolerance: 1e-5 1e-6
// expect: declines reciprocal: `running_mean_kernel`: the divisor `count` is not a `const float` local with an initializer (one a function may not change)
// A running mean along each row: the divisor grows with the loop, so it holds over no
// loop and its division stays.
#include <cuda_runtime.h>

__global__ void running_mean_kernel(const float* x, float* y, int rows, int cols) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  float acc = 0.0f;
  float count = 0.0f;
  for (int c = 0; c < cols; ++c) {
    acc += x[(size_t)row * cols + c];
    count += 1.0f;
    y[(size_t)row * cols + c] = acc / count;
  }
}

extern "C" void running_mean_f32(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  running_mean_kernel<<<(rows + 255) / 256, 256, 0, stream>>>(x, y, rows, cols);
}
