// Hand rewrite of segment_sum for sm_90 (same signature and results as baseline.cu).
//
// - The scan: one block, cub::BlockScan over tiles of 4096 lengths (4 per thread) with a
//   running prefix, two barriers a tile instead of twenty. It lets the sum kernel launch
//   early (programmatic dependent launch): the sum kernel's blocks are scheduled while
//   the scan runs and wait (griddepcontrol.wait) only before they read the offsets.
// - The sum: one warp per segment. The rows of a segment are contiguous, so a warp reads
//   them as one contiguous run with 16-byte loads (8 bf16) where the row width and the
//   pointers allow it (else 8, 4 or 2 bytes). A row of dim / 8 vectors is spread over the
//   smallest power of two of lanes that covers it (16 lanes for dim 128), so one warp
//   step reads 32 / that many rows; four steps are in flight at once. Each lane keeps its
//   columns in fp32 registers, the row groups are combined with shuffles, and one lane
//   group writes the row of sums with vector stores. Offsets are read once per warp, not
//   once per output element; no atomics, and the order of every sum is fixed
//   (bitwise-reproducible).
// - Rows wider than 32 vectors are done 32 vectors (one per lane) at a time.
// Segments here are at most 255 rows, so a warp per segment keeps enough loads in flight;
// power-law segment lengths (a few nodes with 10^5 neighbours) would want a block, or
// several blocks and a second pass, for the longest ones.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cub/block/block_scan.cuh>
#include <stddef.h>
#include <stdint.h>

namespace {

constexpr int kScanThreads = 1024;
constexpr int kScanItems = 4;
constexpr int kSumThreads = 128;  // 4 warps, 4 segments a block: fine-grained blocks balance uneven segments
constexpr int kUnroll = 4;

// The running total carried from tile to tile (called by the first warp of the block).
struct RunningPrefix {
  int total;
  __device__ int operator()(int tile_sum) {
    const int before = total;
    total += tile_sum;
    return before;
  }
};

__global__ void __launch_bounds__(kScanThreads) lengths_to_offsets(const int* __restrict__ lengths,
                                                                   int* __restrict__ offsets, int segments) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Let the sum kernel's blocks start; they wait for this grid to finish before reading.
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  using Scan = cub::BlockScan<int, kScanThreads>;
  __shared__ typename Scan::TempStorage temp;
  RunningPrefix prefix{0};
  for (int base = 0; base < segments; base += kScanThreads * kScanItems) {
    int items[kScanItems];
    const int first = base + threadIdx.x * kScanItems;
#pragma unroll
    for (int j = 0; j < kScanItems; ++j) items[j] = first + j < segments ? lengths[first + j] : 0;
    Scan(temp).ExclusiveSum(items, items, prefix);
    __syncthreads();  // temp is reused by the next tile
#pragma unroll
    for (int j = 0; j < kScanItems; ++j)
      if (first + j < segments) offsets[first + j] = items[j];
  }
  if (threadIdx.x == 0) offsets[segments] = prefix.total;  // thread 0 is in the warp that ran the prefix
}

template <int VEC> struct RawOf;
template <> struct RawOf<8> { using type = uint4; };
template <> struct RawOf<4> { using type = uint2; };
template <> struct RawOf<2> { using type = unsigned; };
template <> struct RawOf<1> { using type = unsigned short; };

template <int VEC>
union Pack {
  typename RawOf<VEC>::type raw;
  __nv_bfloat16 h[VEC];
};

template <int VEC>
__device__ __forceinline__ void accumulate(float (&acc)[VEC], const Pack<VEC>& p) {
#pragma unroll
  for (int j = 0; j < VEC; ++j) acc[j] += __bfloat162float(p.h[j]);
}

// One warp per segment. lanes_per_row: a power of two, at most 32, at least the vectors
// of a row when a row has fewer than 32.
template <int VEC>
__global__ void __launch_bounds__(kSumThreads) segment_sum_warps(const __nv_bfloat16* __restrict__ values,
                                                                 const int* offsets, __nv_bfloat16* __restrict__ out,
                                                                 int segments, int chunks, int lanes_per_row) {
  using Raw = typename RawOf<VEC>::type;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");  // the offsets are written by the scan
#endif
  const int segment = (int)((blockIdx.x * (unsigned)kSumThreads + threadIdx.x) >> 5);
  if (segment >= segments) return;  // whole warps
  const int lane = threadIdx.x & 31;
  const int col = lane & (lanes_per_row - 1);  // which vector of the row (within a pass)
  const int group = lane / lanes_per_row;      // which row of the step
  const int rows_per_step = 32 / lanes_per_row;

  const int start = offsets[segment];
  const int end = offsets[segment + 1];
  const Raw* rows = reinterpret_cast<const Raw*>(values);
  Raw* dst = reinterpret_cast<Raw*>(out) + (size_t)segment * chunks;

  for (int pass = 0; pass < chunks; pass += lanes_per_row) {
    const int c = pass + col;
    float acc[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[j] = 0.0f;
    if (c < chunks) {
      const Raw* p = rows + (size_t)(start + group) * chunks + c;
      const size_t step = (size_t)rows_per_step * chunks;
      int r = start + group;
      for (; r + (kUnroll - 1) * rows_per_step < end; r += kUnroll * rows_per_step) {
        Pack<VEC> x[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) x[u].raw = __ldcs(p + u * step);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) accumulate(acc, x[u]);
        p += kUnroll * step;
      }
      for (; r < end; r += rows_per_step) {
        Pack<VEC> x;
        x.raw = __ldcs(p);
        accumulate(acc, x);
        p += step;
      }
    }
    // Combine the row groups: lanes col, col + lanes_per_row, ... hold the same columns.
    for (int o = 16; o >= lanes_per_row; o >>= 1) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], o);
    }
    if (group == 0 && c < chunks) {
      Pack<VEC> y;
#pragma unroll
      for (int j = 0; j < VEC; ++j) y.h[j] = __float2bfloat16_rn(acc[j]);
      dst[c] = y.raw;
    }
  }
}

template <int VEC>
void launch_sum(const __nv_bfloat16* values, const int* offsets, __nv_bfloat16* out, int segments, int dim,
                cudaStream_t stream) {
  const int chunks = dim / VEC;
  int lanes_per_row = 1;
  while (lanes_per_row < chunks && lanes_per_row < 32) lanes_per_row *= 2;
  const int warps_per_block = kSumThreads / 32;

  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((unsigned)((segments + warps_per_block - 1) / warps_per_block));
  config.blockDim = dim3(kSumThreads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  cudaLaunchKernelEx(&config, segment_sum_warps<VEC>, values, offsets, out, segments, chunks, lanes_per_row);
}

}  // namespace

extern "C" void segment_sum(const __nv_bfloat16* values, const int* lengths, __nv_bfloat16* out, int* offsets,
                            int segments, int dim, cudaStream_t stream) {
  if (segments < 0) return;
  lengths_to_offsets<<<1, kScanThreads, 0, stream>>>(lengths, offsets, segments);
  if (segments == 0 || dim <= 0) return;
  // The widest access every row start (a multiple of the row) and both pointers allow.
  const uintptr_t bits = (uintptr_t)values | (uintptr_t)out | ((size_t)dim * sizeof(__nv_bfloat16));
  if (bits % 16 == 0) {
    launch_sum<8>(values, offsets, out, segments, dim, stream);
  } else if (bits % 8 == 0) {
    launch_sum<4>(values, offsets, out, segments, dim, stream);
  } else if (bits % 4 == 0) {
    launch_sum<2>(values, offsets, out, segments, dim, stream);
  } else {
    launch_sum<1>(values, offsets, out, segments, dim, stream);
  }
}
