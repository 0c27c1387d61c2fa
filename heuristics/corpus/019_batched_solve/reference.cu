#include <cuda_runtime.h>

#define N 8

__global__ void solve_reference(const float* A, const float* B, float* X, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    double a[N][N], b[N];
    for (int r = 0; r < N; r++) {
      for (int c = 0; c < N; c++) a[r][c] = A[(size_t)(r * N + c) * n + i] + (r == c ? 8.0 : 0.0);
      b[r] = B[(size_t)r * n + i];
    }
    for (int k = 0; k < N; k++)
      for (int r = k + 1; r < N; r++) {
        double f = a[r][k] / a[k][k];
        for (int c = k; c < N; c++) a[r][c] -= f * a[k][c];
        b[r] -= f * b[k];
      }
    for (int k = N - 1; k >= 0; k--) {
      double s = b[k];
      for (int c = k + 1; c < N; c++) s -= a[k][c] * b[c];
      b[k] = s / a[k][k];
      X[(size_t)k * n + i] = (float)b[k];
    }
  }
}

extern "C" void batched_solve(const float* A, const float* B, float* X, int n, cudaStream_t stream) {
  if (n <= 0) return;
  solve_reference<<<1024, 128, 0, stream>>>(A, B, X, n);
}
