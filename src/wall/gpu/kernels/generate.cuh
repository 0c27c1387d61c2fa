// What nightshift_generate writes into element i: the host generator's distributions
// (src/task/init.rs) and element conversions (ElemType::write_f64), from counter-based
// random bits (random.cuh) instead of its chunked sequential streams. Not the host's bits.
#pragma once

#include "elements.cuh"
#include "random.cuh"

// What every element of one buffer shares: the spec, its key and its permutation.
struct GenPlan {
    GenSpec spec;
    Key key;
    Perm perm;
};

NS_HD bool gen_spec_valid(const GenSpec& s) { return s.elem < ELEM_COUNT && s.dist <= DIST_RANDPERM; }

NS_HD GenPlan make_plan(const GenSpec& spec) {
    GenPlan g;
    g.spec = spec;
    g.key = derive_key(spec.seed, spec.stream, NS_DOMAIN_VALUES);
    g.perm = make_perm(spec.dist == DIST_RANDPERM ? spec.count : 0, spec.seed, spec.stream);
    return g;
}

// uniform(lo, hi) as a float element: the draw v (lo <= v < hi) rounded to nearest, then
// kept inside [lo, hi): a rounding up to hi (or beyond, to infinity) steps down to the
// largest element below hi, one down past lo steps up to the smallest at or above it. The
// host writes such roundings as they fall (hi itself: one f32 in 2^25 from uniform(0, 1),
// one bf16 in 2^9). Where no element lies in [lo, hi) the nearest is kept.
NS_HD u64 encode_uniform(unsigned elem, double v, double lo, double hi) {
    u64 bits = encode_f64(elem, v);
    if (!elem_is_float(elem) || elem == ELEM_F64) return bits;
    double r = decode_f64(elem, bits);
    if (r >= hi) {
        u64 down = float_next_down(elem, bits);
        if (decode_f64(elem, down) >= lo) bits = down;
    } else if (r < lo) {
        u64 up = float_next_up(elem, bits);
        if (decode_f64(elem, up) < hi) bits = up;
    }
    return bits;
}

NS_HD double below(double hi) {  // the largest double below a finite hi
    u64 b = f64_bits(hi);
    if ((b & 0x7FFFFFFFFFFFFFFFull) == 0) return -f64_from_bits(1);
    return f64_from_bits((b >> 63) ? b + 1 : b - 1);
}

// cos(2 pi u) for u in [0, 1). On the GPU cospi needs no argument reduction (cos's slow
// path costs a stack frame a thread); the host library has no cospi.
NS_HD double cos_two_pi(double u) {
#ifdef __CUDA_ARCH__
    return cospi(mul_rn(2.0, u));
#else
    return cos(6.283185307179586 * u);
#endif
}

// cos(2 pi u) and -2 log(u) in single precision, for outputs no wider than f32: double
// transcendentals made generation FP64-bound (a tenth of the DRAM bandwidth on an H100),
// and a normal draw needs no more precision than the element it lands in.
NS_HD float cos_two_pi_f(float u) {
#ifdef __CUDA_ARCH__
    return cospif(2.0f * u);
#else
    return cosf(6.2831853f * u);
#endif
}

// Element i's bits (in the low bytes). Draw counters 2i and 2i + 1 belong to element i.
NS_HD u64 generated_bits(const GenPlan& g, u64 i) {
    const GenSpec& s = g.spec;
    switch (s.dist) {
    case DIST_NORMAL: {
        // Box-Muller, the cosine half: u1 in (0, 1] keeps the log finite (|z| < 8.6 in
        // double, < 5.7 in single precision, from 24-bit uniforms).
        if (s.elem != ELEM_F64) {
            float u1 = (float)((draw_bits(g.key, 2 * i) >> 40) + 1) * (1.0f / 16777216.0f);
            float u2 = (float)(draw_bits(g.key, 2 * i + 1) >> 40) * (1.0f / 16777216.0f);
            float z = sqrtf(-2.0f * logf(u1)) * cos_two_pi_f(u2);
            return encode_f64(s.elem, add_rn(s.a, mul_rn(s.b, (double)z)));
        }
        double u1 = unit_open_closed(draw_bits(g.key, 2 * i));
        double u2 = unit_closed_open(draw_bits(g.key, 2 * i + 1));
        double z = mul_rn(sqrt(mul_rn(-2.0, log(u1))), cos_two_pi(u2));
        return encode_f64(s.elem, add_rn(s.a, mul_rn(s.b, z)));
    }
    case DIST_UNIFORM: {
        double u = unit_closed_open(draw_bits(g.key, 2 * i));
        double v = add_rn(s.a, mul_rn(sub_rn(s.b, s.a), u));
        if (v >= s.b) v = below(s.b);  // lo + span * u can round up to hi
        return encode_uniform(s.elem, v, s.a, s.b);
    }
    case DIST_RANDINT: {
        // hi > lo, so the span is 1 ..= 2^64 - 1 as an unsigned difference.
        u64 span = (u64)s.hi - (u64)s.lo;
        return encode_i64(s.elem, (i64)((u64)s.lo + mul_high(draw_bits(g.key, 2 * i), span)));
    }
    case DIST_CONST: return encode_f64(s.elem, s.a);
    case DIST_ARANGE: return encode_u64(s.elem, i);
    case DIST_RANDPERM: return encode_u64(s.elem, permute(g.perm, i));
    default: return 0;
    }
}

// One thread's share of a launch: elements begin, begin + stride, ... below count.
NS_HD void generate_thread(unsigned char* out, const GenPlan& g, u64 begin, u64 stride) {
    if (!gen_spec_valid(g.spec)) return;  // no element size to write with
    for (u64 i = begin; i < g.spec.count; i += stride) store_bits(out, g.spec.elem, i, generated_bits(g, i));
}

// The first element of the thread's share whose bits differ from what generate writes;
// ULLONG_MAX if none. An invalid spec fails at element 0, so it can never pass.
NS_HD u64 check_thread(const unsigned char* buf, const GenPlan& g, u64 begin, u64 stride) {
    if (!gen_spec_valid(g.spec)) return begin == 0 && g.spec.count > 0 ? 0 : ~0ull;
    for (u64 i = begin; i < g.spec.count; i += stride)
        if (load_bits(buf, g.spec.elem, i) != generated_bits(g, i)) return i;
    return ~0ull;
}

// Lowers *first_bad to `index` (atomically on the GPU).
NS_HD void note_first_bad(u64* first_bad, u64 index) {
    if (index == ~0ull) return;
#ifdef __CUDA_ARCH__
    atomicMin(first_bad, index);
#else
    if (index < *first_bad) *first_bad = index;
#endif
}
