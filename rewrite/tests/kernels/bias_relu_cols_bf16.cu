// entry: bias_relu
// arg: x in __nv_bfloat16 rows*cols
// arg: bias in float cols
// arg: out out __nv_bfloat16 rows*cols
// arg: rows int 8192
// arg: cols int 4096
// tolerance: 1e-2 1e-3
// expect: applies vectorize: `bias_relu_kernel`: 8 elements per thread, x 16B in, out 16B out, bias 16B in (its run of columns) through registers; `i` divided once per run of 8 by `cols` (a multiple of 8) (1 site(s))
// expect: applies read-only
#include <cuda_runtime.h>
#include <cuda_bf16.h>

// A linear layer's epilogue: a bias per column, then ReLU. One thread per element; the
// column comes from the flat index, so every element divides by `cols`.
__global__ void bias_relu_kernel(const __nv_bfloat16* x, const float* bias, __nv_bfloat16* out, int rows,
                                 int cols) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)rows * cols) return;
  const int c = (int)(i % cols);
  const float v = __bfloat162float(x[i]) + bias[c];
  out[i] = __float2bfloat16(v > 0.f ? v : 0.f);
}

extern "C" void bias_relu(const __nv_bfloat16* x, const float* bias, __nv_bfloat16* out, int rows, int cols,
                          cudaStream_t stream) {
  const long long n = (long long)rows * cols;
  if (n <= 0) return;
  bias_relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, bias, out, rows, cols);
}
