// The judge kernels' parameter structs: the ABI shared with the Rust mirrors in mod.rs
// (`#[repr(C)]`, sizes and offsets asserted on both sides). Passed by value as kernel
// parameters (GenSpec, CmpSpec) or by pointer (CmpResult, in device memory).
#pragma once

#include <stddef.h>

// Code that runs on the GPU and in the host build the tests load (tests/judge_kernels).
#ifdef __CUDACC__
#define NS_HD __host__ __device__ inline
#else
#define NS_HD inline
#endif

typedef unsigned long long u64;
typedef long long i64;

// How one buffer is generated. `dist` and `elem` are the codes below; `a` and `b` are the
// float parameters (normal: mean, std; uniform: lo, hi; const: value), `lo` and `hi` the
// integer ones (randint, half-open).
struct GenSpec {
    u64 count, seed, stream;
    unsigned int dist, elem;
    double a, b;
    i64 lo, hi;
};

enum : unsigned int {
    DIST_NORMAL = 0,
    DIST_UNIFORM = 1,
    DIST_RANDINT = 2,
    DIST_CONST = 3,
    DIST_ARANGE = 4,
    DIST_RANDPERM = 5,
};

// Element types, numbered as src/task/types.rs declares ElemType; little-endian.
enum : unsigned int {
    ELEM_F32 = 0,
    ELEM_F64 = 1,
    ELEM_F16 = 2,
    ELEM_BF16 = 3,
    ELEM_I8 = 4,
    ELEM_U8 = 5,
    ELEM_I16 = 6,
    ELEM_U16 = 7,
    ELEM_I32 = 8,
    ELEM_U32 = 9,
    ELEM_I64 = 10,
    ELEM_U64 = 11,
    ELEM_F8E4M3 = 12,
    ELEM_F8E5M2 = 13,
    ELEM_COUNT = 14,
};

// How one output is compared with its reference (verify::compare's tolerance).
struct CmpSpec {
    u64 count;
    unsigned int elem, pad;
    double rtol, atol;
};

// What a comparison found. The judge starts it at zero except `first_mismatch` and
// `first_expected_nonfinite`, which start at ULLONG_MAX (none). The max_*_err_bits hold
// the f64 bit pattern of a non-negative value: for those, the order of the bits as
// unsigned integers is the order of the values, so atomicMax on the bits is a max.
struct CmpResult {
    u64 mismatches, first_mismatch, max_abs_err_bits, max_rel_err_bits, expected_nonfinite,
        first_expected_nonfinite;
};

static_assert(sizeof(GenSpec) == 64, "GenSpec layout");
static_assert(offsetof(GenSpec, count) == 0 && offsetof(GenSpec, seed) == 8 && offsetof(GenSpec, stream) == 16,
              "GenSpec layout");
static_assert(offsetof(GenSpec, dist) == 24 && offsetof(GenSpec, elem) == 28, "GenSpec layout");
static_assert(offsetof(GenSpec, a) == 32 && offsetof(GenSpec, b) == 40, "GenSpec layout");
static_assert(offsetof(GenSpec, lo) == 48 && offsetof(GenSpec, hi) == 56, "GenSpec layout");
static_assert(sizeof(CmpSpec) == 32, "CmpSpec layout");
static_assert(offsetof(CmpSpec, count) == 0 && offsetof(CmpSpec, elem) == 8 && offsetof(CmpSpec, pad) == 12,
              "CmpSpec layout");
static_assert(offsetof(CmpSpec, rtol) == 16 && offsetof(CmpSpec, atol) == 24, "CmpSpec layout");
static_assert(sizeof(CmpResult) == 48, "CmpResult layout");
static_assert(offsetof(CmpResult, mismatches) == 0 && offsetof(CmpResult, first_mismatch) == 8 &&
                  offsetof(CmpResult, max_abs_err_bits) == 16 && offsetof(CmpResult, max_rel_err_bits) == 24 &&
                  offsetof(CmpResult, expected_nonfinite) == 32 && offsetof(CmpResult, first_expected_nonfinite) == 40,
              "CmpResult layout");
