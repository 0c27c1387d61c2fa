#include <cuda_runtime.h>

#define SPLIT 64
#define MAX_CHANNELS 256

__device__ float g_partial[MAX_CHANNELS * SPLIT];

__device__ float block_sum(float s) {
  __shared__ float part[32];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < blockDim.x / 32; w++) total += part[w];
  return total;
}

__global__ void channel_partial(const float* __restrict__ x, int len) {
  int ch = blockIdx.y, part = blockIdx.x;
  size_t chunk = ((size_t)len + SPLIT - 1) / SPLIT;
  size_t begin = part * chunk, end = min((size_t)len, begin + chunk);
  const float* src = x + (size_t)ch * len;
  float s = 0.0f;
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) s += src[i];
  float total = block_sum(s);
  if (threadIdx.x == 0) g_partial[ch * SPLIT + part] = total;
}

__global__ void channel_combine(float* out, int channels) {
  int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= channels) return;
  float s = 0.0f;
  for (int p = 0; p < SPLIT; p++) s += g_partial[ch * SPLIT + p];
  out[ch] = s;
}

__global__ void channel_whole(const float* x, float* out, int len) {
  const float* ch = x + (size_t)blockIdx.x * len;
  float s = 0.0f;
  for (int i = threadIdx.x; i < len; i += blockDim.x) s += ch[i];
  float total = block_sum(s);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}

extern "C" void channel_sums(const float* x, float* out, int channels, int len, cudaStream_t stream) {
  if (channels <= 0) return;
  if (channels > MAX_CHANNELS || channels >= 132) {
    channel_whole<<<channels, 1024, 0, stream>>>(x, out, len);
    return;
  }
  channel_partial<<<dim3(SPLIT, channels), 512, 0, stream>>>(x, len);
  channel_combine<<<(channels + 127) / 128, 128, 0, stream>>>(out, channels);
}
