#include <cuda_runtime.h>

#define N 8

__global__ void __launch_bounds__(1024) solve_kernel(const float* A, const float* B, float* X, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;

  float a[N][N], b[N];
#pragma unroll
  for (int r = 0; r < N; r++) {
#pragma unroll
    for (int c = 0; c < N; c++) a[r][c] = A[(size_t)(r * N + c) * n + i] + (r == c ? 8.0f : 0.0f);
    b[r] = B[(size_t)r * n + i];
  }
#pragma unroll
  for (int k = 0; k < N; k++) {
    float inv = 1.0f / a[k][k];
#pragma unroll
    for (int r = k + 1; r < N; r++) {
      float f = a[r][k] * inv;
#pragma unroll
      for (int c = k + 1; c < N; c++) a[r][c] -= f * a[k][c];
      b[r] -= f * b[k];
    }
  }
#pragma unroll
  for (int k = N - 1; k >= 0; k--) {
    float s = b[k];
#pragma unroll
    for (int c = k + 1; c < N; c++) s -= a[k][c] * b[c];
    b[k] = s / a[k][k];
    X[(size_t)k * n + i] = b[k];
  }

}

extern "C" void batched_solve(const float* A, const float* B, float* X, int n, cudaStream_t stream) {
  if (n <= 0) return;
  solve_kernel<<<(n + 1023) / 1024, 1024, 0, stream>>>(A, B, X, n);
}
