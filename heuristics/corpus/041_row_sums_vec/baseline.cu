#include <cuda_runtime.h>

__global__ void rowsum_vec(const float* __restrict__ x, float* __restrict__ out, int cols) {
  const float* row = x + (size_t)blockIdx.x * cols;
  float s0 = 0.0f, s1 = 0.0f;
  int vec = (cols % 4 == 0) ? cols / 4 : 0;
  const float4* row4 = reinterpret_cast<const float4*>(row);
  int c = threadIdx.x;
  for (; c + blockDim.x < vec; c += 2 * blockDim.x) {
    float4 a = row4[c], b = row4[c + blockDim.x];
    s0 += (a.x + a.y) + (a.z + a.w);
    s1 += (b.x + b.y) + (b.z + b.w);
  }
  if (c < vec) { float4 a = row4[c]; s0 += (a.x + a.y) + (a.z + a.w); }
  for (int j = vec * 4 + threadIdx.x; j < cols; j += blockDim.x) s1 += row[j];
  float s = s0 + s1;
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  __shared__ float part[8];
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int w = 0; w < 8; w++) t += part[w];
    out[blockIdx.x] = t;
  }
}

extern "C" void row_sums(const float* x, float* out, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0) return;
  rowsum_vec<<<rows, 256, 0, stream>>>(x, out, cols);
}
