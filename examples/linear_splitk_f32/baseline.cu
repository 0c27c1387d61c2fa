// Token-batched fp32 linear layer, y = x W^T + b as nn.Linear computes it (W is
// out_features x in_features, row-major): the attention and MLP projections of an fp32
// model served at small batches. It was written for decode. A block computes a BT x BN tile
// of outputs (tokens x features) over one slice of K through shared memory, and SPLIT_K
// slices of K run as blocks of their own whose partial sums meet in y by atomicAdd: at
// 8 tokens the weight is the whole traffic, and only split slices give enough blocks to
// stream it at full bandwidth.
#include <cuda_runtime.h>

#ifndef BN
#define BN 32  // output features per block: 16 threads along n, BN / 16 outputs each
#endif
#ifndef BT
#define BT 16  // tokens per block: 16 threads along t, BT / 16 tokens each
#endif
#ifndef SPLIT_K
#define SPLIT_K 4  // slices of K, each a block of its own
#endif
#define BK 32

__global__ void linear_splitk_kernel(const float* x, const float* W, const float* b, float* y, int T, int N, int K,
                                     int chunk) {
  __shared__ float xs[BT][BK + 1];
  __shared__ float ws[BN][BK + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * 16 + tx;
  const int n0 = blockIdx.x * BN, t0 = blockIdx.y * BT;
  const int k_begin = blockIdx.z * chunk;
  const int k_end = min(K, k_begin + chunk);
  float acc[BT / 16][BN / 16];
#pragma unroll
  for (int i = 0; i < BT / 16; ++i)
#pragma unroll
    for (int j = 0; j < BN / 16; ++j) acc[i][j] = 0.f;
  for (int k0 = k_begin; k0 < k_end; k0 += BK) {
    for (int e = tid; e < BT * BK; e += 256) {
      const int r = e / BK, c = e % BK, t = t0 + r, k = k0 + c;
      xs[r][c] = (t < T && k < k_end) ? x[(size_t)t * K + k] : 0.f;
    }
    for (int e = tid; e < BN * BK; e += 256) {
      const int r = e / BK, c = e % BK, n = n0 + r, k = k0 + c;
      ws[r][c] = (n < N && k < k_end) ? W[(size_t)n * K + k] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk)
#pragma unroll
      for (int i = 0; i < BT / 16; ++i)
#pragma unroll
        for (int j = 0; j < BN / 16; ++j) acc[i][j] += xs[ty + 16 * i][kk] * ws[tx + 16 * j][kk];
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < BT / 16; ++i)
#pragma unroll
    for (int j = 0; j < BN / 16; ++j) {
      const int t = t0 + ty + 16 * i, n = n0 + tx + 16 * j;
      if (t >= T || n >= N) continue;
      float v = acc[i][j];
      if (gridDim.z == 1) {
        y[(size_t)t * N + n] = v + b[n];
      } else {
        if (blockIdx.z == 0) v += b[n];
        atomicAdd(&y[(size_t)t * N + n], v);
      }
    }
}

extern "C" void linear_splitk_f32(const float* x, const float* W, const float* b, float* y, int T, int N, int K,
                                  cudaStream_t stream) {
  if (T <= 0 || N <= 0 || K <= 0) return;
  int chunk = (K + SPLIT_K - 1) / SPLIT_K;
  chunk = (chunk + BK - 1) / BK * BK;
  const int splits = (K + chunk - 1) / chunk;
  if (splits > 1) cudaMemsetAsync(y, 0, sizeof(float) * (size_t)T * N, stream);
  dim3 grid((N + BN - 1) / BN, (T + BT - 1) / BT, splits);
  linear_splitk_kernel<<<grid, dim3(16, 16), 0, stream>>>(x, W, b, y, T, N, K, chunk);
}
