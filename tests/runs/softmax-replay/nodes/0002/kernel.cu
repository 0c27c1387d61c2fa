// technique: online-softmax
// One block per row; the max and the sum of exponentials in one pass (online softmax,
// rescaling the running sum when the max grows), then one normalizing pass: x is read
// twice instead of three times. Warp shuffles for the block reductions.
#include <cuda_runtime.h>
#include <float.h>

#define THREADS 256

__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  float mm = fmaxf(m, m2);
  s = (m == -FLT_MAX ? 0.f : s * expf(m - mm)) + (m2 == -FLT_MAX ? 0.f : s2 * expf(m2 - mm));
  m = mm;
}

__global__ void softmax_online(const float* __restrict__ x, float* __restrict__ y, int cols) {
  const float* row = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  float m = -FLT_MAX, s = 0.f;
  for (int c = threadIdx.x; c < cols; c += THREADS) {
    float v = row[c];
    if (v > m) { s = s * expf(m - v) + 1.f; m = v; } else { s += expf(v - m); }
  }
  for (int o = 16; o > 0; o >>= 1) {
    float m2 = __shfl_xor_sync(0xffffffff, m, o), s2 = __shfl_xor_sync(0xffffffff, s, o);
    merge(m, s, m2, s2);
  }
  __shared__ float sm[THREADS / 32], ss[THREADS / 32];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) { sm[warp] = m; ss[warp] = s; }
  __syncthreads();
  if (warp == 0) {
    m = lane < THREADS / 32 ? sm[lane] : -FLT_MAX;
    s = lane < THREADS / 32 ? ss[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) {
      float m2 = __shfl_xor_sync(0xffffffff, m, o), s2 = __shfl_xor_sync(0xffffffff, s, o);
      merge(m, s, m2, s2);
    }
    if (lane == 0) { sm[0] = m; ss[0] = s; }
  }
  __syncthreads();
  m = sm[0];
  float inv = 1.f / ss[0];
  for (int c = threadIdx.x; c < cols; c += THREADS) out[c] = expf(row[c] - m) * inv;
}

extern "C" void softmax(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  softmax_online<<<rows, THREADS, 0, stream>>>(x, y, cols);
}
