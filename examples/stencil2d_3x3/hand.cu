// Hand rewrite of the 3x3 stencil for sm_90 (same contract as baseline.cu: zero padding,
// w[3 * (dy + 1) + (dx + 1)] multiplies x[r + dy, c + dx]).
//
// Each warp owns a tile 32 * V columns wide and kRows rows tall of one image and walks it
// top to bottom. Every lane holds V consecutive columns (V = 4: one 16-byte load per row,
// when W is a multiple of 4 and the buffers are 16-byte aligned; V = 1 otherwise). Each
// input row is loaded once: its left and right neighbours come from the adjacent lanes
// through warp shuffles, and only lanes 0 and 31 load one extra pixel beyond the tile.
// A row contributes to three outputs (the one above, its own, the one below): the
// thread keeps two partial sums in registers, finishes the output above when a row
// arrives, and stores it. The weights sit in registers. Rows are prefetched two ahead
// so that each warp keeps two row loads in flight. A strip reads kRows + 2 rows; the
// two halo rows were just loaded by the neighbouring strips and come from L2.
#include <cuda_runtime.h>
#include <cstdint>

namespace {

constexpr int kRows = 16;   // output rows per warp
constexpr int kWarps = 4;   // warps per block
constexpr unsigned kFull = 0xffffffffu;

// One input row as this lane sees it: its V pixels, and for lane 0 the pixel left of the
// tile, for lane 31 the one right of it (zero outside the image).
template <int V>
struct Row {
  float v[V];
  float edge;
};

template <int V>
__device__ __forceinline__ Row<V> load_row(const float* __restrict__ img, int r, int H, int W, int c0,
                                           int lane) {
  Row<V> row;
  const bool row_ok = r >= 0 && r < H;
  const float* p = img + (size_t)(row_ok ? r : 0) * W;
  const bool in = row_ok && c0 < W;  // V = 4 only when W % 4 == 0: all four or none
  if constexpr (V == 4) {
    float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
    if (in) t = __ldg(reinterpret_cast<const float4*>(p + c0));
    row.v[0] = t.x;
    row.v[1] = t.y;
    row.v[2] = t.z;
    row.v[3] = t.w;
  } else {
    row.v[0] = in ? __ldg(p + c0) : 0.f;
  }
  const int ce = lane == 0 ? c0 - 1 : c0 + V;
  row.edge = (row_ok && (lane == 0 || lane == 31) && ce >= 0 && ce < W) ? __ldg(p + ce) : 0.f;
  return row;
}

template <int V>
__global__ void __launch_bounds__(kWarps * 32) stencil2d_3x3_strip(const float* __restrict__ x,
                                                                   const float* __restrict__ w9,
                                                                   float* __restrict__ y, int N, int H, int W,
                                                                   int tiles_x, int strips) {
  const int lane = threadIdx.x & 31;
  const long long warp = (long long)blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int tx = (int)(warp % tiles_x);
  const long long rest = warp / tiles_x;
  const int s = (int)(rest % strips);
  const long long n = rest / strips;
  if (n >= N) return;  // warp-uniform: the whole warp leaves together

  float w[9];
#pragma unroll
  for (int k = 0; k < 9; ++k) w[k] = __ldg(w9 + k);

  const int c0 = tx * (32 * V) + lane * V;
  const int y0 = s * kRows;
  const int y1 = min(y0 + kRows, H);  // outputs y0 .. y1 - 1; inputs y0 - 1 .. y1
  const float* img = x + (size_t)n * H * W;
  float* out = y + (size_t)n * H * W;

  float acc_a[V], acc_b[V];  // partial outputs of row i + 1 and row i (before row i + 1 arrives)
#pragma unroll
  for (int j = 0; j < V; ++j) acc_a[j] = acc_b[j] = 0.f;

  Row<V> cur = load_row<V>(img, y0 - 1, H, W, c0, lane);
  Row<V> nxt = load_row<V>(img, y0, H, W, c0, lane);
  for (int i = y0 - 1; i <= y1; ++i) {
    // Rows past y1 are not needed: load_row reads nothing for them outside the image,
    // and inside it the third row ahead is skipped.
    Row<V> nxt2;
    if (i + 2 <= y1) {
      nxt2 = load_row<V>(img, i + 2, H, W, c0, lane);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) nxt2.v[j] = 0.f;
      nxt2.edge = 0.f;
    }

    // The row with one neighbour on each side: e[j] is column c0 - 1 + j.
    float e[V + 2];
    const float left = __shfl_up_sync(kFull, cur.v[V - 1], 1);
    const float right = __shfl_down_sync(kFull, cur.v[0], 1);
    e[0] = lane == 0 ? cur.edge : left;
    e[V + 1] = lane == 31 ? cur.edge : right;
#pragma unroll
    for (int j = 0; j < V; ++j) e[j + 1] = cur.v[j];

    // Row i completes output row i - 1 (weights of the bottom row, dy = +1).
    if (i > y0) {
      float o[V];
#pragma unroll
      for (int j = 0; j < V; ++j) o[j] = fmaf(w[8], e[j + 2], fmaf(w[7], e[j + 1], fmaf(w[6], e[j], acc_b[j])));
      if (c0 < W) {
        float* q = out + (size_t)(i - 1) * W + c0;
        if constexpr (V == 4) {
          __stcs(reinterpret_cast<float4*>(q), make_float4(o[0], o[1], o[2], o[3]));
        } else {
          __stcs(q, o[0]);
        }
      }
    }
    // Row i is the middle row of output i and the top row of output i + 1.
#pragma unroll
    for (int j = 0; j < V; ++j) {
      acc_b[j] = fmaf(w[5], e[j + 2], fmaf(w[4], e[j + 1], fmaf(w[3], e[j], acc_a[j])));
      acc_a[j] = fmaf(w[2], e[j + 2], fmaf(w[1], e[j + 1], w[0] * e[j]));
    }
    cur = nxt;
    nxt = nxt2;
  }
}

template <int V>
void launch(const float* x, const float* w, float* y, int N, int H, int W, cudaStream_t stream) {
  const int tiles_x = (W + 32 * V - 1) / (32 * V);
  const int strips = (H + kRows - 1) / kRows;
  const long long warps = (long long)N * strips * tiles_x;
  const long long blocks = (warps + kWarps - 1) / kWarps;
  stencil2d_3x3_strip<V><<<(unsigned)blocks, kWarps * 32, 0, stream>>>(x, w, y, N, H, W, tiles_x, strips);
}

}  // namespace

extern "C" void stencil2d_3x3(const float* x, const float* w, float* y, int N, int H, int W,
                              cudaStream_t stream) {
  if (N <= 0 || H <= 0 || W <= 0) return;
  const bool vec4 = W % 4 == 0 && ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
  if (vec4) {
    launch<4>(x, w, y, N, H, W, stream);
  } else {
    launch<1>(x, w, y, N, H, W, stream);
  }
}
