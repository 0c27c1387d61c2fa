// Batch-1 fully connected layer in fp32: y = W x + b, W row-major (out_features x
// in_features). This is the per-step gate projection of an fp32 LSTM decoder (speech
// model, greedy decoding), where the batch is a single hypothesis. One thread computes
// one output feature as a dot product over its row of W.
#include <cuda_runtime.h>
#include <stddef.h>

constexpr int kBlockSize = 128;

__global__ void gemv_bias_kernel(const float* W, const float* x, const float* b, float* y, size_t M, size_t K) {
  size_t row = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M) return;
  float acc = 0.0f;
  for (size_t k = 0; k < K; ++k) {
    acc += W[row * K + k] * x[k];
  }
  y[row] = acc + b[row];
}

extern "C" void gemv_bias_f32(const float* W, const float* x, const float* b, float* y, int M, int K,
                              cudaStream_t stream) {
  if (M <= 0) return;
  const int grid = (M + kBlockSize - 1) / kBlockSize;
  gemv_bias_kernel<<<grid, kBlockSize, 0, stream>>>(W, x, b, y, (size_t)M, (size_t)K);
}
