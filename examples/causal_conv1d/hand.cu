// Hand rewrite of the depthwise causal conv1d (width 4) + bias + SiLU for sm_90; same
// contract as baseline.cu.
//
// A warp owns a segment of one (b, d) row: kIters chunks of 32 * V consecutive time
// steps, each lane V of them (V = 8: one 16-byte load and one 16-byte store per chunk,
// when seqlen is a multiple of 8 and the buffers are 16-byte aligned; V = 1 otherwise).
// All kIters loads are issued before any arithmetic, so a lane has 64 bytes in flight.
// The four weights and the bias are loaded once per warp (one channel per warp). Each
// output needs the three inputs before its own: they come from the previous lane's
// registers through shuffles, and for lane 0 from lane 31's previous chunk (a sliding
// window carried in registers across the chunks); only the first chunk of a segment
// loads its three-element halo from memory. Every input is read from DRAM once.
// SiLU uses the fast exp and divide intrinsics (relative error ~1e-6, far below the bf16
// output's 4e-3 half-ulp).
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

namespace {

constexpr int kWidth = 4;
constexpr int kIters = 4;  // chunks per warp
constexpr int kWarps = 4;  // warps per block
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float lo_bf16(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_bf16(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<const unsigned*>(&h);
}

__device__ __forceinline__ float finish(float v, int silu) {
  return silu ? __fdividef(v, 1.0f + __expf(-v)) : v;
}

template <int V>
__global__ void __launch_bounds__(kWarps * 32)
    causal_conv1d_fwd_seg(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ weight,
                          const __nv_bfloat16* __restrict__ bias, __nv_bfloat16* __restrict__ out, int dim,
                          int seqlen, long long rows, int segs, int silu) {
  constexpr int kChunk = 32 * V;
  const int lane = threadIdx.x & 31;
  const long long warp = (long long)blockIdx.x * kWarps + (threadIdx.x >> 5);
  const long long row = warp / segs;
  if (row >= rows) return;  // warp-uniform
  const int seg = (int)(warp - row * segs);
  const int d = (int)(row % dim);

  float w[kWidth];
#pragma unroll
  for (int k = 0; k < kWidth; ++k) w[k] = __bfloat162float(weight[d * kWidth + k]);
  const float b = bias != nullptr ? __bfloat162float(bias[d]) : 0.0f;

  const __nv_bfloat16* xrow = x + row * seqlen;
  __nv_bfloat16* orow = out + row * seqlen;
  const int t0 = seg * (kChunk * kIters);
  const int src = (lane + 31) & 31;  // the lane before this one (lane 0: lane 31, previous chunk)

  if constexpr (V == 8) {
    uint4 v[kIters];
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int t = t0 + it * kChunk + lane * 8;
      v[it] = t < seqlen ? __ldg(reinterpret_cast<const uint4*>(xrow + t)) : make_uint4(0, 0, 0, 0);
    }
    // The chunk before the segment, as lane 31 would have held it (zero before t = 0).
    uint4 prev = make_uint4(0, 0, 0, 0);
    if (lane == 31 && t0 > 0) prev = __ldg(reinterpret_cast<const uint4*>(xrow + t0 - 8));

#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      // Elements 5, 6, 7 of the previous lane's vector: the high half of .z and all of .w.
      const unsigned az = __shfl_sync(kFull, v[it].z, src), aw = __shfl_sync(kFull, v[it].w, src);
      const unsigned bz = __shfl_sync(kFull, prev.z, src), bw = __shfl_sync(kFull, prev.w, src);
      const unsigned hz = lane == 0 ? bz : az, hw = lane == 0 ? bw : aw;
      float e[8 + kWidth - 1];  // e[j] is time t - 3 + j
      e[0] = hi_bf16(hz);
      e[1] = lo_bf16(hw);
      e[2] = hi_bf16(hw);
      const unsigned words[4] = {v[it].x, v[it].y, v[it].z, v[it].w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        e[3 + 2 * q] = lo_bf16(words[q]);
        e[4 + 2 * q] = hi_bf16(words[q]);
      }
      float o[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float acc = fmaf(w[3], e[j + 3], fmaf(w[2], e[j + 2], fmaf(w[1], e[j + 1], fmaf(w[0], e[j], b))));
        o[j] = finish(acc, silu);
      }
      const int t = t0 + it * kChunk + lane * 8;
      if (t < seqlen) {
        const uint4 r = make_uint4(pack_bf16x2(o[0], o[1]), pack_bf16x2(o[2], o[3]), pack_bf16x2(o[4], o[5]),
                                   pack_bf16x2(o[6], o[7]));
        __stcs(reinterpret_cast<uint4*>(orow + t), r);
      }
      prev = v[it];
    }
  } else {
    float v[kIters];
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int t = t0 + it * kChunk + lane;
      v[it] = t < seqlen ? __bfloat162float(__ldg(xrow + t)) : 0.0f;
    }
    // Lanes 29..31 of the chunk before the segment (zero before t = 0; t0 >= 128 otherwise).
    float prev = 0.0f;
    if (lane >= 32 - (kWidth - 1) && t0 > 0) prev = __bfloat162float(__ldg(xrow + t0 - 32 + lane));

#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      float e[kWidth];  // e[j] is time t - 3 + j
      e[kWidth - 1] = v[it];
#pragma unroll
      for (int k = 1; k < kWidth; ++k) {
        const float a = __shfl_sync(kFull, v[it], (lane - k) & 31);
        const float p = __shfl_sync(kFull, prev, (lane - k) & 31);
        e[kWidth - 1 - k] = lane >= k ? a : p;
      }
      const float acc = fmaf(w[3], e[3], fmaf(w[2], e[2], fmaf(w[1], e[1], fmaf(w[0], e[0], b))));
      const int t = t0 + it * kChunk + lane;
      if (t < seqlen) orow[t] = __float2bfloat16_rn(finish(acc, silu));
      prev = v[it];
    }
  }
}

template <int V>
void launch(const __nv_bfloat16* x, const __nv_bfloat16* weight, const __nv_bfloat16* bias, __nv_bfloat16* out,
            int batch, int dim, int seqlen, int silu, cudaStream_t stream) {
  constexpr int kSeg = 32 * V * kIters;
  const int segs = (seqlen + kSeg - 1) / kSeg;
  const long long rows = (long long)batch * dim;
  const long long blocks = (rows * segs + kWarps - 1) / kWarps;
  causal_conv1d_fwd_seg<V><<<(unsigned)blocks, kWarps * 32, 0, stream>>>(x, weight, bias, out, dim, seqlen, rows,
                                                                          segs, silu);
}

}  // namespace

extern "C" void causal_conv1d_fwd(const __nv_bfloat16* x, const __nv_bfloat16* weight, const __nv_bfloat16* bias,
                                  __nv_bfloat16* out, int batch, int dim, int seqlen, int silu,
                                  cudaStream_t stream) {
  if (batch <= 0 || dim <= 0 || seqlen <= 0) return;
  const bool vec8 =
      seqlen % 8 == 0 && ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(out)) & 15) == 0;
  if (vec8) {
    launch<8>(x, weight, bias, out, batch, dim, seqlen, silu, stream);
  } else {
    launch<1>(x, weight, bias, out, batch, dim, seqlen, silu, stream);
  }
}
