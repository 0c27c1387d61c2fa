#include <cuda_runtime.h>
#include <cuda_fp16.h>

#define T 16

__global__ void gemm_tiled(const __half* A, const __half* B, float* C, int M, int N, int K) {
  __shared__ float As[T][T], Bs[T][T];
  int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += T) {
    As[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? __half2float(A[(size_t)row * K + k0 + threadIdx.x]) : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? __half2float(B[(size_t)(k0 + threadIdx.y) * N + col]) : 0.0f;
    __syncthreads();
    for (int k = 0; k < T; k++) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

extern "C" void gemm_f16_f32(const __half* A, const __half* B, float* C, int M, int N, int K, cudaStream_t stream) {
  if (M <= 0 || N <= 0) return;
  dim3 grid((N + T - 1) / T, (M + T - 1) / T);
  gemm_tiled<<<grid, dim3(T, T), 0, stream>>>(A, B, C, M, N, K);
}
