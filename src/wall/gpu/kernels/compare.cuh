// What nightshift_compare decides for each element: verify::element_ok and the error
// measures of verify::compare_range, plus a count of the reference's non-finite elements.
#pragma once

#include "elements.cuh"

// verify::element_ok: NaN where and only where the reference has NaN, infinities equal,
// |got - expected| <= atol + rtol * |expected| for floats, within floor(atol) for integers.
NS_HD bool element_ok(unsigned elem, double got, double expected, double rtol, double atol) {
    if (is_nan(expected) || is_nan(got)) return is_nan(expected) && is_nan(got);
    if (is_inf(expected) || is_inf(got)) return got == expected;
    double diff = fabs(sub_rn(got, expected));
    if (elem_is_float(elem)) return diff <= add_rn(atol, mul_rn(rtol, fabs(expected)));
    return diff <= floor(atol);
}

// One thread's findings (and, merged, a warp's). Index fields hold ULLONG_MAX for none.
struct CmpAcc {
    u64 mismatches, first_mismatch;
    double max_abs, max_rel;  // non-negative, never NaN
    u64 nonfinite, first_nonfinite;
};

NS_HD CmpAcc cmp_acc_empty() { return CmpAcc{0, ~0ull, 0.0, 0.0, 0, ~0ull}; }

NS_HD CmpAcc cmp_acc_merge(const CmpAcc& a, const CmpAcc& b) {
    return CmpAcc{a.mismatches + b.mismatches,
                  a.first_mismatch < b.first_mismatch ? a.first_mismatch : b.first_mismatch,
                  a.max_abs > b.max_abs ? a.max_abs : b.max_abs,
                  a.max_rel > b.max_rel ? a.max_rel : b.max_rel,
                  a.nonfinite + b.nonfinite,
                  a.first_nonfinite < b.first_nonfinite ? a.first_nonfinite : b.first_nonfinite};
}

// compare_range's body for element i: errors over finite pairs only (relative where the
// reference is not zero), then the verdict.
NS_HD void compare_element(CmpAcc& acc, unsigned elem, double got, double expected, double rtol, double atol,
                           u64 i) {
    if (is_finite(got) && is_finite(expected)) {
        double abs_err = fabs(sub_rn(got, expected));
        if (abs_err > acc.max_abs) acc.max_abs = abs_err;
        if (expected != 0.0) {
            double rel_err = div_rn(abs_err, fabs(expected));
            if (rel_err > acc.max_rel) acc.max_rel = rel_err;
        }
    }
    if (!element_ok(elem, got, expected, rtol, atol)) {
        acc.mismatches += 1;
        if (i < acc.first_mismatch) acc.first_mismatch = i;
    }
    if (!is_finite(expected)) {
        acc.nonfinite += 1;
        if (i < acc.first_nonfinite) acc.first_nonfinite = i;
    }
}

// One thread's share, elements begin, begin + stride, ...; E known when compiled, so the
// per-element dispatch on the type folds away.
template <unsigned E>
NS_HD CmpAcc compare_thread_as(const unsigned char* got, const unsigned char* expected, const CmpSpec& s, u64 begin,
                               u64 stride) {
    CmpAcc acc = cmp_acc_empty();
    for (u64 i = begin; i < s.count; i += stride)
        compare_element(acc, E, decode_f64(E, load_bits(got, E, i)), decode_f64(E, load_bits(expected, E, i)), s.rtol,
                        s.atol, i);
    return acc;
}

// An unknown element type (a judge bug) fails every element, so it can never pass.
NS_HD CmpAcc compare_thread(const unsigned char* got, const unsigned char* expected, const CmpSpec& s, u64 begin,
                            u64 stride) {
    switch (s.elem) {
    case ELEM_F32: return compare_thread_as<ELEM_F32>(got, expected, s, begin, stride);
    case ELEM_F64: return compare_thread_as<ELEM_F64>(got, expected, s, begin, stride);
    case ELEM_F16: return compare_thread_as<ELEM_F16>(got, expected, s, begin, stride);
    case ELEM_BF16: return compare_thread_as<ELEM_BF16>(got, expected, s, begin, stride);
    case ELEM_I8: return compare_thread_as<ELEM_I8>(got, expected, s, begin, stride);
    case ELEM_U8: return compare_thread_as<ELEM_U8>(got, expected, s, begin, stride);
    case ELEM_I16: return compare_thread_as<ELEM_I16>(got, expected, s, begin, stride);
    case ELEM_U16: return compare_thread_as<ELEM_U16>(got, expected, s, begin, stride);
    case ELEM_I32: return compare_thread_as<ELEM_I32>(got, expected, s, begin, stride);
    case ELEM_U32: return compare_thread_as<ELEM_U32>(got, expected, s, begin, stride);
    case ELEM_I64: return compare_thread_as<ELEM_I64>(got, expected, s, begin, stride);
    case ELEM_U64: return compare_thread_as<ELEM_U64>(got, expected, s, begin, stride);
    case ELEM_F8E4M3: return compare_thread_as<ELEM_F8E4M3>(got, expected, s, begin, stride);
    case ELEM_F8E5M2: return compare_thread_as<ELEM_F8E5M2>(got, expected, s, begin, stride);
    default: {
        CmpAcc acc = cmp_acc_empty();
        if (begin == 0 && s.count > 0) {
            acc.mismatches = s.count;
            acc.first_mismatch = 0;
        }
        return acc;
    }
    }
}

// Adds findings to the judge's result (atomically on the GPU), touching only fields that
// change: in a passing comparison only the two maxima are written.
NS_HD void publish(CmpResult* r, const CmpAcc& a) {
    u64 abs_bits = f64_bits(a.max_abs), rel_bits = f64_bits(a.max_rel);
#ifdef __CUDA_ARCH__
    if (a.mismatches) atomicAdd(&r->mismatches, a.mismatches);
    if (a.first_mismatch != ~0ull) atomicMin(&r->first_mismatch, a.first_mismatch);
    if (abs_bits) atomicMax(&r->max_abs_err_bits, abs_bits);
    if (rel_bits) atomicMax(&r->max_rel_err_bits, rel_bits);
    if (a.nonfinite) atomicAdd(&r->expected_nonfinite, a.nonfinite);
    if (a.first_nonfinite != ~0ull) atomicMin(&r->first_expected_nonfinite, a.first_nonfinite);
#else
    r->mismatches += a.mismatches;
    if (a.first_mismatch < r->first_mismatch) r->first_mismatch = a.first_mismatch;
    if (abs_bits > r->max_abs_err_bits) r->max_abs_err_bits = abs_bits;
    if (rel_bits > r->max_rel_err_bits) r->max_rel_err_bits = rel_bits;
    r->expected_nonfinite += a.nonfinite;
    if (a.first_nonfinite < r->first_expected_nonfinite) r->first_expected_nonfinite = a.first_nonfinite;
#endif
}
