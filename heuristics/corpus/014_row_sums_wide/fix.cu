#include <cuda_runtime.h>

__global__ void rowsum_ilp(const float* __restrict__ x, float* __restrict__ out, int cols) {
  const float* row = x + (size_t)blockIdx.x * cols;
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  // Rows start 16-byte aligned only when cols is a multiple of 4.
  int vec = (cols % 4 == 0) ? cols / 4 : 0;
  const float4* row4 = reinterpret_cast<const float4*>(row);
  int c = threadIdx.x;
  for (; c + 3 * blockDim.x < vec; c += 4 * blockDim.x) {
    float4 a = row4[c], b = row4[c + blockDim.x], d = row4[c + 2 * blockDim.x], e = row4[c + 3 * blockDim.x];
    s0 += (a.x + a.y) + (a.z + a.w);
    s1 += (b.x + b.y) + (b.z + b.w);
    s2 += (d.x + d.y) + (d.z + d.w);
    s3 += (e.x + e.y) + (e.z + e.w);
  }
  for (; c < vec; c += blockDim.x) {
    float4 a = row4[c];
    s0 += (a.x + a.y) + (a.z + a.w);
  }
  for (int j = vec * 4 + threadIdx.x; j < cols; j += blockDim.x) s1 += row[j];
  float s = (s0 + s1) + (s2 + s3);

  __shared__ float part[256];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];

}

extern "C" void row_sums_wide(const float* x, float* out, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0) return;
  rowsum_ilp<<<rows, 256, 0, stream>>>(x, out, cols);
}
