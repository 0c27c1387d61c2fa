// entry: smooth3_rows
// arg: x in float rows*L
// arg: y out float rows*L
// arg: rows int 4096
// arg: L int 8192
// tolerance: 1e-6 1e-6
// expect: applies vectorize: `smooth3_rows_kernel`: 4 elements per thread, y 16B out through registers; `x` read through a register window: the run (16B) plus 1 before and 1 after (3 read site(s))
// expect: declines cooperative
// expect: declines row-strip
// A [1 2 1] / 4 smoothing of a signal of rows * L samples, zero past its ends: the
// element's neighbours are read at the flat index minus and plus one, each only where it
// lies inside the signal.
#include <cuda_runtime.h>

__global__ void smooth3_rows_kernel(const float* x, float* y, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float left = i > 0 ? x[i - 1] : 0.0f;
  const float right = i + 1 < n ? x[i + 1] : 0.0f;
  y[i] = 0.25f * left + 0.5f * x[i] + 0.25f * right;
}

extern "C" void smooth3_rows(const float* x, float* y, int rows, int L, cudaStream_t stream) {
  const long long n = (long long)rows * L;
  if (n <= 0) return;
  smooth3_rows_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);
}
