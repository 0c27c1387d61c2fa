// entry: matmul_f32
// arg: A in float M*K
// arg: B in float K*N
// arg: C out float M*N
// arg: M int 2048
// arg: N int 2048
// arg: K int 2048
// tolerance: 1e-4 1e-4
// expect: applies prefetch: `matmul_tile`: the `k0` loop loads the next trip's 2 staged values into registers during this trip's work, one element a load (`width=4` does not hold for the loop at line 24: no staging loop: a single store has no neighbours to load with)
// expect: applies tensor-tile: `matmul_tile`: `As` x `Bs` over `k` on tensor cores (3xTF32), the sums added to `acc` after the loop; `As`'s rows padded to ((TILE + 1) + 7) / 16 * 16 + 8; `Bs`'s rows padded to ((TILE) + 7) / 16 * 16 + 8
#include <cuda_runtime.h>

#define TILE 16

// C = A B, one output a thread. A's tile is staged k-major (As[k][row]) so that the
// threads of a warp write consecutive addresses.
__global__ void matmul_tile(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[TILE][TILE + 1];
  __shared__ float Bs[TILE][TILE];
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  const int arow = blockIdx.y * TILE + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[threadIdx.y][threadIdx.x] = (arow < M && k0 + threadIdx.y < K) ? A[(size_t)arow * K + k0 + threadIdx.y] : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? B[(size_t)(k0 + threadIdx.y) * N + col] : 0.f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[k][threadIdx.y] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

extern "C" void matmul_f32(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
  dim3 block(TILE, TILE);
  dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  matmul_tile<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
}
