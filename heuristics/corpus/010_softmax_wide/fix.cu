#include <cuda_runtime.h>

__global__ void softmax_online(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float sm[32], ss[32];
  const float* row = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  // One pass: running max m and sum s of exp(v - m), rescaled when m grows.
  float m = -INFINITY, s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = row[c];
    if (v > m) { s = s * expf(m - v) + 1.0f; m = v; }
    else s += expf(v - m);
  }
  for (int o = 16; o > 0; o >>= 1) {
    float om = __shfl_down_sync(0xffffffffu, m, o), os = __shfl_down_sync(0xffffffffu, s, o);
    float nm = fmaxf(m, om);
    s = (m == -INFINITY ? 0.0f : s * expf(m - nm)) + (om == -INFINITY ? 0.0f : os * expf(om - nm));
    m = nm;
  }
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) { sm[warp] = m; ss[warp] = s; }
  __syncthreads();
  float gm = -INFINITY;
  for (int w = 0; w < blockDim.x / 32; w++) gm = fmaxf(gm, sm[w]);
  float gs = 0.0f;
  for (int w = 0; w < blockDim.x / 32; w++) if (sm[w] != -INFINITY) gs += ss[w] * expf(sm[w] - gm);
  float inv = 1.0f / gs;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = expf(row[c] - gm) * inv;
}

extern "C" void softmax_wide(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  softmax_online<<<rows, 1024, 0, stream>>>(x, y, cols);
}
