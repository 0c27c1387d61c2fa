#include <cuda_runtime.h>

__device__ float block_sum(float s) {
  __shared__ float part[32];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < blockDim.x / 32; w++) total += part[w];
  return total;
}

__global__ void channel_sum_kernel(const float* x, float* out, int len) {
  const float* ch = x + (size_t)blockIdx.x * len;
  float s = 0.0f;
  for (int i = threadIdx.x; i < len; i += blockDim.x) s += ch[i];
  float total = block_sum(s);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}

extern "C" void channel_sums(const float* x, float* out, int channels, int len, cudaStream_t stream) {
  if (channels <= 0) return;
  channel_sum_kernel<<<channels, 1024, 0, stream>>>(x, out, len);
}
