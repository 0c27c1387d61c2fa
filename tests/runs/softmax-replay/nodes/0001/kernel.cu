// A faster softmax: the row stays in registers between the max, the sum and the write
// (x is read once instead of three times), 16-byte loads and stores when rows are
// 16-byte aligned, and warp-shuffle reductions instead of a shared-memory tree.
#include <cuda_runtime.h>
#include <float.h>

constexpr int kBlock = 256;
constexpr int kWarps = kBlock / 32;

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// All threads of the block get the result; `scratch` holds one float per warp.
template <bool IsMax>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
  v = IsMax ? warp_max(v) : warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kWarps ? scratch[lane] : (IsMax ? -FLT_MAX : 0.f);
  v = IsMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // scratch is reused by the next reduction
  return v;
}

template <int kVecs>
__global__ void __launch_bounds__(kBlock) softmax_vec4(const float4* __restrict__ x, float4* __restrict__ y, int cols4) {
  __shared__ float scratch[kWarps];
  const float4* row = x + (size_t)blockIdx.x * cols4;
  float4* out = y + (size_t)blockIdx.x * cols4;
  float4 v[kVecs];
  float m = -FLT_MAX;
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int c = threadIdx.x + k * kBlock;
    if (c < cols4) {
      v[k] = row[c];
      m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
    }
  }
  m = block_reduce<true>(m, scratch);
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    if (threadIdx.x + k * kBlock < cols4) {
      v[k].x = expf(v[k].x - m);
      v[k].y = expf(v[k].y - m);
      v[k].z = expf(v[k].z - m);
      v[k].w = expf(v[k].w - m);
      s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
  }
  const float inv = 1.f / block_reduce<false>(s, scratch);
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int c = threadIdx.x + k * kBlock;
    if (c < cols4) out[c] = make_float4(v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv);
  }
}

template <int kPer>
__global__ void __launch_bounds__(kBlock) softmax_scalar(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float scratch[kWarps];
  const float* row = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  float v[kPer];
  float m = -FLT_MAX;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = threadIdx.x + k * kBlock;
    v[k] = c < cols ? row[c] : -FLT_MAX;
    m = fmaxf(m, v[k]);
  }
  m = block_reduce<true>(m, scratch);
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    v[k] = threadIdx.x + k * kBlock < cols ? expf(v[k] - m) : 0.f;
    s += v[k];
  }
  const float inv = 1.f / block_reduce<false>(s, scratch);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = threadIdx.x + k * kBlock;
    if (c < cols) out[c] = v[k] * inv;
  }
}

// Rows too long for registers: an online max-and-sum pass, then a normalizing pass.
__global__ void __launch_bounds__(kBlock) softmax_online(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float scratch[kWarps];
  const float* row = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  float m = -FLT_MAX, s = 0.f;
  for (int c = threadIdx.x; c < cols; c += kBlock) {
    const float v = row[c];
    if (v > m) {
      s = s * expf(m - v) + 1.f;
      m = v;
    } else {
      s += expf(v - m);
    }
  }
  const float gm = block_reduce<true>(m, scratch);
  s = s * expf(m - gm);
  const float inv = 1.f / block_reduce<false>(s, scratch);
  for (int c = threadIdx.x; c < cols; c += kBlock) out[c] = expf(row[c] - gm) * inv;
}

extern "C" void softmax(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  if (cols % 4 == 0 && cols / 4 <= 4 * kBlock) {
    softmax_vec4<4><<<rows, kBlock, 0, stream>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), cols / 4);
  } else if (cols % 4 == 0 && cols / 4 <= 8 * kBlock) {
    softmax_vec4<8><<<rows, kBlock, 0, stream>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), cols / 4);
  } else if (cols <= 16 * kBlock) {
    softmax_scalar<16><<<rows, kBlock, 0, stream>>>(x, y, cols);
  } else {
    softmax_online<<<rows, kBlock, 0, stream>>>(x, y, cols);
  }
}
