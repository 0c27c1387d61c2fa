//! Definitions that rewritten code calls, inserted once per file before its first
//! function (each behind its own macro, so a second rewrite does not repeat it).

use crate::version::Helper;

/// Wide loads and stores of N consecutive elements: 16 bytes at a time where the run
/// is a multiple of 16 bytes, else 8 or 4, else element by element. The staging arrays
/// are 16-byte aligned locals that the compiler keeps in registers.
pub static VECTOR_IO: Helper = Helper {
    mark: "NIGHTSHIFT_VECTOR_IO",
    text: r#"
// nightshift: wide loads and stores of N consecutive elements (used by vectorized paths).
template <int N, typename T>
__device__ __forceinline__ void ns_copy(T* dst, const T* src) {
  constexpr int kBytes = N * (int)sizeof(T);
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int j = 0; j < kBytes / 16; ++j) reinterpret_cast<uint4*>(dst)[j] = reinterpret_cast<const uint4*>(src)[j];
  } else if constexpr (kBytes % 8 == 0) {
#pragma unroll
    for (int j = 0; j < kBytes / 8; ++j) reinterpret_cast<uint2*>(dst)[j] = reinterpret_cast<const uint2*>(src)[j];
  } else if constexpr (kBytes % 4 == 0) {
#pragma unroll
    for (int j = 0; j < kBytes / 4; ++j) reinterpret_cast<unsigned*>(dst)[j] = reinterpret_cast<const unsigned*>(src)[j];
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) dst[j] = src[j];
  }
}
template <int N, typename T>
__device__ __forceinline__ void ns_load(T (&dst)[N], const T* src) {
  ns_copy<N>(dst, src);
}
template <int N, typename T>
__device__ __forceinline__ void ns_store(T* dst, const T (&src)[N]) {
  ns_copy<N>(dst, src);
}"#,
};

/// Four consecutive elements in one load, for `prefetch`'s width 4 (its caller has tested
/// that they are 4 bytes each and the first 16-byte aligned). Needs VECTOR_IO before it.
pub static PREFETCH_WIDE: Helper = Helper {
    mark: "NIGHTSHIFT_PREFETCH_WIDE",
    text: r#"
// nightshift: four consecutive elements in one load (prefetch's width 4).
#include <cstdint>
template <typename T>
struct alignas(16) ns_pf_quad {
  T v[4];
};
template <typename T>
__device__ __forceinline__ ns_pf_quad<T> ns_pf_load4(const T* p) {
  ns_pf_quad<T> q;
  ns_copy<4>(q.v, p);
  return q;
}"#,
};

/// Whether a staging loop's bound is a whole multiple of 4 (prefetch's width 4): false
/// for a bound that is no integer, where `%` would not compile. Apart from the loads so
/// that a host model replacing those still runs this one.
pub static PREFETCH_WHOLE: Helper = Helper {
    mark: "NIGHTSHIFT_PREFETCH_WHOLE",
    text: r#"
// nightshift: whether a staging loop's bound is a whole multiple of 4 (never for a bound
// that is no integer, such as a `const float` the file sizes it with).
#include <type_traits>
template <typename T>
__host__ __device__ constexpr bool ns_pf_whole4(T v) {
  if constexpr (std::is_integral<T>::value) {
    return v % 4 == 0;
  } else {
    return false;
  }
}"#,
};

/// One element of a run's aligned block, out of a wide load of the whole block: every
/// element of the run loads the same block, and the compiler keeps one load (see
/// `vectorize`'s reads at a run's columns). Needs VECTOR_IO before it.
pub static RUN_PICK: Helper = Helper {
    mark: "NIGHTSHIFT_RUN_PICK",
    text: r#"
// nightshift: element k of the N-element block at run (the block loaded wide).
template <int N, typename T>
__device__ __forceinline__ T ns_pick(const T* run, int k) {
  alignas(16) T block[N];
  ns_load(block, run);
  return block[k];
}"#,
};

/// What the launcher's checks make true of a vectorized run's first column `r = base % m`,
/// told to the compiler, which cannot see it through the division (see
/// `index_split::Splits::prelude`). A function, not casts in the kernel's text: there
/// `index-width` would narrow the casts of the divisor, and in its own types an unsigned
/// divisor past 2^31 would read as negative.
pub static RUN_COLUMN: Helper = Helper {
    mark: "NIGHTSHIFT_RUN_COLUMN",
    text: r#"
// nightshift: what the launcher checks make true of a run's first column r = base % m
// (base >= 0 and a multiple of V, m > 0; with Whole, m a multiple of V), told to the
// compiler. One fact per assumption: nvcc loses facts of a conjunction.
template <int V, bool Whole, typename R, typename M>
__device__ __forceinline__ void ns_assume_column(R r, M m) {
  __builtin_assume((long long)r >= 0);
  if constexpr (Whole) {
    __builtin_assume((long long)r % V == 0);
    __builtin_assume((long long)r <= (long long)m - V);
  } else {
    __builtin_assume((long long)r < (long long)m);
  }
}"#,
};

/// A strided loop's runs kept within its index type (`vectorize`): the check in 64 bits
/// whatever the kernel's types, out of `index-width`'s reach.
pub static RUN_BASES: Helper = Helper {
    mark: "NIGHTSHIFT_RUN_BASES",
    text: r#"
// nightshift: whether a strided loop's runs of V consecutive elements keep their bases
// within `top`: the first at begin + start * V (start < stride), the one that ends the
// loop at most bound + stride * V. It reads no thread's own start, so the threads that
// share a range take the same path.
template <int V>
__device__ __forceinline__ bool ns_runs_fit(long long begin, long long stride, long long bound, long long top) {
  return (begin > 0 ? begin : 0) + (2 * stride + 1) * V + (bound > 0 ? bound : 0) <= top;
}"#,
};

/// Host-side checks for the launcher's fast-path conditions.
pub static HOST_CHECKS: Helper = Helper {
    mark: "NIGHTSHIFT_HOST_CHECKS",
    text: r#"
// nightshift: run-time checks that choose between a fast path and the original kernel.
inline bool ns_aligned(const void* p, unsigned long long bytes) {
  return ((unsigned long long)p % bytes) == 0;
}
inline bool ns_disjoint(const void* a, long long a_bytes, const void* b, long long b_bytes) {
  const char* x = (const char*)a;
  const char* y = (const char*)b;
  return x + a_bytes <= y || y + b_bytes <= x;
}"#,
};

/// Division by a run-time constant with a multiply-high and a shift (Granlund and
/// Montgomery; the form PyTorch's IntDivider uses): exact for dividends below 2^31 and
/// divisors from 1 to 2^31 - 1, which the launcher checks.
pub static FAST_DIVMOD: Helper = Helper {
    mark: "NIGHTSHIFT_FAST_DIVMOD",
    text: r#"
// nightshift: division by a run-time constant with a multiply-high and a shift. Exact for
// n < 2^31 and 1 <= d < 2^31 (the launcher checks both).
struct ns_divisor {
  unsigned d, m, s;
};
inline ns_divisor ns_make_divisor(long long d) {
  ns_divisor r;
  r.d = (unsigned)d;
  r.s = 0;
  while (r.s < 32 && (1ull << r.s) < (unsigned long long)r.d) ++r.s;
  r.m = (unsigned)(((1ull << 32) * ((1ull << r.s) - r.d)) / r.d + 1);
  return r;
}
__device__ __forceinline__ unsigned ns_div(unsigned n, ns_divisor v) {
  return (__umulhi(n, v.m) + n) >> v.s;
}
__device__ __forceinline__ unsigned ns_mod(unsigned n, ns_divisor v) {
  return n - ns_div(n, v) * v.d;
}"#,
};

/// Grids capped at a number of blocks per SM, for grid-stride kernels.
pub static GRID_CAP: Helper = Helper {
    mark: "NIGHTSHIFT_GRID_CAP",
    text: r#"
// nightshift: a grid of at most `per_sm` blocks per SM of the current device.
inline unsigned ns_grid_cap(long long blocks, int per_sm) {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms <= 0) sms = 132;
  const long long cap = (long long)sms * per_sm;
  if (blocks < 1) blocks = 1;
  return (unsigned)(blocks < cap ? blocks : cap);
}"#,
};

/// The grid of a coarsened launch.
pub static COARSE_GRID: Helper = Helper {
    mark: "NIGHTSHIFT_COARSE_GRID",
    text: r#"
// nightshift: a grid of `blocks` blocks' work in blocks that do `per` each. A grid the
// launch would refuse (0, or past 2^31 - 1) is passed on as it is, so it still fails.
inline unsigned ns_coarse_grid(unsigned long long blocks, unsigned per) {
  if (blocks == 0 || blocks > 2147483647ull || per < 1) return (unsigned)blocks;
  return (unsigned)((blocks + per - 1) / per);
}
inline dim3 ns_coarse_grid3(dim3 grid, unsigned per) {
  return dim3(ns_coarse_grid(grid.x, per), grid.y, grid.z);
}"#,
};

/// One 16-byte store of four 32-bit values (`row-strip`'s runs of columns). Written in
/// PTX: where the same values are also stored one at a time on the other branch, nvcc
/// 13.0 merges a `float4` assignment into the scalar stores.
pub static STORE16: Helper = Helper {
    mark: "NIGHTSHIFT_STORE16",
    text: r#"
// nightshift: four 32-bit values stored at a 16-byte aligned global address at once.
__device__ __forceinline__ unsigned ns_bits32(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned ns_bits32(int v) { return (unsigned)v; }
__device__ __forceinline__ unsigned ns_bits32(unsigned v) { return v; }
template <typename T>
__device__ __forceinline__ void ns_store16(T* dst, T a, T b, T c, T d) {
  static_assert(sizeof(T) == 4, "four 32-bit values");
  asm("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(ns_bits32(a)), "r"(ns_bits32(b)), "r"(ns_bits32(c)),
      "r"(ns_bits32(d))
      : "memory");
}"#,
};

/// Fast approximations for transcendental functions without a hardware intrinsic.
pub static FAST_MATH: Helper = Helper {
    mark: "NIGHTSHIFT_FAST_MATH",
    text: r#"
// nightshift: approximations used where the task's tolerance admits them.
__device__ __forceinline__ float ns_tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// Abramowitz and Stegun 7.1.26 with the hardware exponential: |error| < 3e-7.
__device__ __forceinline__ float ns_erf_fast(float x) {
  const float a = fabsf(x);
  const float t = __frcp_rn(fmaf(0.3275911f, a, 1.0f));
  const float p = t * fmaf(t, fmaf(t, fmaf(t, fmaf(t, 1.061405429f, -1.453152027f), 1.421413741f), -0.284496736f), 0.254829592f);
  const float r = 1.0f - p * __expf(-a * a);
  return copysignf(r, x);
}"#,
};
