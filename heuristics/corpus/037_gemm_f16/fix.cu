#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

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

// One warp per 16x16 output tile; 8 warps per block cover a 32x64 block tile.
__global__ void gemm_wmma(const __half* __restrict__ A, const __half* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  int warp = threadIdx.x / 32;
  int tile_row = blockIdx.y * 2 + warp / 4, tile_col = blockIdx.x * 4 + warp % 4;
  if (tile_row * 16 >= M || tile_col * 16 >= N) return;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < K; k += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
    wmma::load_matrix_sync(a, A + (size_t)tile_row * 16 * K + k, K);
    wmma::load_matrix_sync(b, B + (size_t)k * N + tile_col * 16, N);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(C + (size_t)tile_row * 16 * N + tile_col * 16, acc, N, wmma::mem_row_major);
}

extern "C" void gemm_f16_f32(const __half* A, const __half* B, float* C, int M, int N, int K, cudaStream_t stream) {
  if (M <= 0 || N <= 0) return;
  if (M % 16 == 0 && N % 16 == 0 && K % 16 == 0) {
    dim3 grid((N / 16 + 3) / 4, (M / 16 + 1) / 2);
    gemm_wmma<<<grid, 256, 0, stream>>>(A, B, C, M, N, K);
  } else {
    dim3 grid((N + T - 1) / T, (M + T - 1) / T);
    gemm_tiled<<<grid, dim3(T, T), 0, stream>>>(A, B, C, M, N, K);
  }
}
