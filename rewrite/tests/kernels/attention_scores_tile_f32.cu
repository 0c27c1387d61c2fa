// entry: attention_scores_f32
// arg: q in float heads*L*D
// arg: k in float heads*L*D
// arg: s out float heads*L*L
// arg: scale float
// arg: heads int 32
// arg: L int 1024
// arg: D int 128
// tolerance: 1e-4 1e-4
// expect: applies prefetch
// expect: applies tensor-tile: `scores_tile`: `qs` x `ks` over `d` on tensor cores (3xTF32), the sums added to `acc` after the loop; `qs`'s rows padded to ((33) + 3) / 8 * 8 + 4; `ks`'s rows padded to ((33) + 3) / 8 * 8 + 4
#include <cuda_runtime.h>

// S = scale * Q K^T per head: a block computes 64 x 64 scores, a thread 4 x 4 of them, over
// 32-wide slices of the head dimension staged in shared memory (both operands rows of D).
__global__ void scores_tile(const float* q, const float* k, float* s, float scale, int L, int D) {
  __shared__ float qs[64][33];
  __shared__ float ks[64][33];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const int r0 = blockIdx.y * 64, c0 = blockIdx.x * 64;
  const float* qh = q + (size_t)blockIdx.z * L * D;
  const float* kh = k + (size_t)blockIdx.z * L * D;
  float acc[4][4] = {};
  for (int d0 = 0; d0 < D; d0 += 32) {
    for (int e = tid; e < 64 * 32; e += 256) {
      const int r = e / 32, c = e % 32;
      qs[r][c] = (r0 + r < L && d0 + c < D) ? qh[(size_t)(r0 + r) * D + d0 + c] : 0.f;
      ks[r][c] = (c0 + r < L && d0 + c < D) ? kh[(size_t)(c0 + r) * D + d0 + c] : 0.f;
    }
    __syncthreads();
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j)
        for (int d = 0; d < 32; ++d) acc[i][j] += qs[ty * 4 + i][d] * ks[tx * 4 + j][d];
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int r = r0 + ty * 4 + i, c = c0 + tx * 4 + j;
      if (r < L && c < L) s[((size_t)blockIdx.z * L + r) * L + c] = scale * acc[i][j];
    }
}

extern "C" void attention_scores_f32(const float* q, const float* k, float* s, float scale, int heads, int L, int D,
                                     cudaStream_t stream) {
  dim3 grid((L + 63) / 64, (L + 63) / 64, heads);
  scores_tile<<<grid, dim3(16, 16), 0, stream>>>(q, k, s, scale, L, D);
}
