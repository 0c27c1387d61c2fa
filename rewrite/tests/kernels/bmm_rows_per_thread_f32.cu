// entry: bmm_f32
// arg: A in float batch*M*K
// arg: B in float batch*K*N
// arg: C out float batch*M*N
// arg: batch int 64
// arg: M int 512
// arg: N int 512
// arg: K int 512
// tolerance: 1e-4 1e-4
// expect: applies prefetch
// expect: applies tensor-tile: `bmm_tile`: `As` x `Bs` over `kk` on tensor cores (3xTF32), the sums added to `acc` after the loop; `As`'s rows padded to ((TS + 1) + 3) / 8 * 8 + 4; `Bs`'s rows padded to ((TS + 1) + 7) / 16 * 16 + 8
#include <cuda_runtime.h>

constexpr int TS = 32;
constexpr int ROWS = 8;

// Batched C = A B: a 32 x 8 block computes a 32 x 32 tile, each thread four rows of one column.
__global__ void bmm_tile(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[TS][TS + 1];
  __shared__ float Bs[TS][TS + 1];
  const float* a = A + (size_t)blockIdx.z * M * K;
  const float* b = B + (size_t)blockIdx.z * K * N;
  const int col = blockIdx.x * TS + threadIdx.x;
  float acc[TS / ROWS];
  for (int i = 0; i < TS / ROWS; ++i) acc[i] = 0.f;
  for (int k0 = 0; k0 < K; k0 += TS) {
    for (int r = threadIdx.y; r < TS; r += ROWS) {
      const int row = blockIdx.y * TS + r;
      As[r][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? a[(size_t)row * K + k0 + threadIdx.x] : 0.f;
      Bs[r][threadIdx.x] = (k0 + r < K && col < N) ? b[(size_t)(k0 + r) * N + col] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < TS; ++kk) {
#pragma unroll
      for (int i = 0; i < TS / ROWS; ++i) acc[i] += As[threadIdx.y + ROWS * i][kk] * Bs[kk][threadIdx.x];
    }
    __syncthreads();
  }
  for (int i = 0; i < TS / ROWS; ++i) {
    const int row = blockIdx.y * TS + threadIdx.y + ROWS * i;
    if (row < M && col < N) C[((size_t)blockIdx.z * M + row) * N + col] = acc[i];
  }
}

extern "C" void bmm_f32(const float* A, const float* B, float* C, int batch, int M, int N, int K, cudaStream_t stream) {
  const dim3 block(TS, ROWS);
  const dim3 grid((N + TS - 1) / TS, (M + TS - 1) / TS, batch);
  bmm_tile<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
}
