// Elements as values: reading one as f64 (ElemType::read_f64) and writing an f64 as one
// (ElemType::write_f64, the host generator's conversion), bit for bit as the host does,
// in integer code that means the same on the host and on every GPU architecture (no
// cuda_fp16/cuda_bf16 intrinsics, whose availability and rounding differ by target).
#pragma once

#include "specs.cuh"

#include <math.h>
#ifndef __CUDA_ARCH__
#include <string.h>
#endif

// Arithmetic rounded once per operation, on the GPU as on the host: a multiply and an add
// fused into one FMA (nvcc's and the driver JIT's habit) would round differently from the
// host's `atol + rtol * |expected|`, and could differ between two JIT compiles of the same
// generator (the buffer's and its check's).
NS_HD double mul_rn(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}

NS_HD double add_rn(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}

NS_HD double sub_rn(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}

NS_HD double div_rn(double a, double b) {
#ifdef __CUDA_ARCH__
    return __ddiv_rn(a, b);
#else
    return a / b;
#endif
}

NS_HD unsigned elem_size(unsigned elem) {
    switch (elem) {
    case ELEM_I8:
    case ELEM_U8:
    case ELEM_F8E4M3:
    case ELEM_F8E5M2: return 1;
    case ELEM_F16:
    case ELEM_BF16:
    case ELEM_I16:
    case ELEM_U16: return 2;
    case ELEM_F32:
    case ELEM_I32:
    case ELEM_U32: return 4;
    default: return 8;
    }
}

NS_HD bool elem_is_float(unsigned elem) { return elem <= ELEM_BF16 || elem == ELEM_F8E4M3 || elem == ELEM_F8E5M2; }

NS_HD u64 f64_bits(double v) {
#ifdef __CUDA_ARCH__
    return (u64)__double_as_longlong(v);
#else
    u64 b;
    memcpy(&b, &v, 8);
    return b;
#endif
}

NS_HD double f64_from_bits(u64 b) {
#ifdef __CUDA_ARCH__
    return __longlong_as_double((i64)b);
#else
    double v;
    memcpy(&v, &b, 8);
    return v;
#endif
}

NS_HD unsigned f32_bits(float v) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(v);
#else
    unsigned b;
    memcpy(&b, &v, 4);
    return b;
#endif
}

NS_HD float f32_from_bits(unsigned b) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(b);
#else
    float v;
    memcpy(&v, &b, 4);
    return v;
#endif
}

NS_HD bool is_nan(double v) { return (f64_bits(v) & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull; }
NS_HD bool is_inf(double v) { return (f64_bits(v) & 0x7FFFFFFFFFFFFFFFull) == 0x7FF0000000000000ull; }
NS_HD bool is_finite(double v) { return (f64_bits(v) & 0x7FF0000000000000ull) != 0x7FF0000000000000ull; }

// 2^e as a double, for the exponents of f16 and bf16 (normal doubles only).
NS_HD double pow2(int e) { return f64_from_bits((u64)(e + 1023) << 52); }

// f32 -> f16, round to nearest even: the `half` crate's software conversion (the same
// bits as x86's F16C instruction, which it uses where the CPU has one).
NS_HD unsigned short f32_to_f16(float value) {
    unsigned x = f32_bits(value);
    unsigned sign = x & 0x80000000u, exp = x & 0x7F800000u, man = x & 0x007FFFFFu;
    if (exp == 0x7F800000u) {
        unsigned nan_bit = man == 0 ? 0 : 0x0200u;
        return (unsigned short)((sign >> 16) | 0x7C00u | nan_bit | (man >> 13));
    }
    unsigned half_sign = sign >> 16;
    int half_exp = (int)(exp >> 23) - 127 + 15;
    if (half_exp >= 0x1F) return (unsigned short)(half_sign | 0x7C00u);
    if (half_exp <= 0) {
        if (14 - half_exp > 24) return (unsigned short)half_sign;
        man |= 0x00800000u;
        unsigned half_man = man >> (14 - half_exp);
        unsigned round_bit = 1u << (13 - half_exp);
        if ((man & round_bit) != 0 && (man & (3 * round_bit - 1)) != 0) half_man += 1;
        return (unsigned short)(half_sign | half_man);
    }
    unsigned bits = half_sign | ((unsigned)half_exp << 10) | (man >> 13);
    unsigned round_bit = 0x00001000u;
    if ((man & round_bit) != 0 && (man & (3 * round_bit - 1)) != 0) bits += 1;
    return (unsigned short)bits;
}

// f64 -> f16 as the host generator does it where it runs (x86-64 with F16C, every GPU
// host we know): `half::f16::from_f64` rounds to f32 first, then to f16.
NS_HD unsigned short f64_to_f16(double v) { return f32_to_f16((float)v); }

// f64 -> bf16: `half::bf16::from_f64`, ported line for line (it has no hardware path). It
// rounds from the upper 32 bits of the double only, so a tie decided by the lower 32 bits
// rounds as if they were zero; kept, so that both generators write the same bf16 values.
NS_HD unsigned short f64_to_bf16(double value) {
    u64 val = f64_bits(value);
    unsigned x = (unsigned)(val >> 32);
    unsigned sign = x & 0x80000000u, exp = x & 0x7FF00000u, man = x & 0x000FFFFFu;
    if (exp == 0x7FF00000u) {
        unsigned nan_bit = (man == 0 && (unsigned)val == 0) ? 0 : 0x0040u;
        return (unsigned short)((sign >> 16) | 0x7F80u | nan_bit | (man >> 13));
    }
    unsigned half_sign = sign >> 16;
    i64 half_exp = (i64)(exp >> 20) - 1023 + 127;
    if (half_exp >= 0xFF) return (unsigned short)(half_sign | 0x7F80u);
    if (half_exp <= 0) {
        if (7 - half_exp > 21) return (unsigned short)half_sign;
        man |= 0x00100000u;
        unsigned half_man = man >> (14 - half_exp);
        unsigned round_bit = 1u << (13 - half_exp);
        if ((man & round_bit) != 0 && (man & (3 * round_bit - 1)) != 0) half_man += 1;
        return (unsigned short)(half_sign | half_man);
    }
    unsigned bits = half_sign | ((unsigned)half_exp << 7) | (man >> 13);
    unsigned round_bit = 0x00001000u;
    if ((man & round_bit) != 0 && (man & (3 * round_bit - 1)) != 0) bits += 1;
    return (unsigned short)bits;
}

// f16 -> f64, exact (every f16 is a double).
NS_HD double f16_to_f64(unsigned short h) {
    unsigned exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    double mag;
    if (exp == 0x1F) {
        mag = f64_from_bits(man == 0 ? 0x7FF0000000000000ull : 0x7FF8000000000000ull);
    } else if (exp == 0) {
        mag = (double)man * pow2(-24);
    } else {
        mag = (double)(man | 0x400) * pow2((int)exp - 25);
    }
    return (h & 0x8000) ? -mag : mag;
}

// bf16 -> f64, exact: a bf16 is the upper half of an f32.
NS_HD double bf16_to_f64(unsigned short b) { return (double)f32_from_bits((unsigned)b << 16); }

// f64 -> fp8, round to nearest even, saturating to the largest finite value: CUDA's
// `__nv_cvt_double_to_fp8(x, __NV_SATFINITE, ...)` (cuda_fp8.hpp), which the `float8`
// crate ports for the host generator; ported here line for line in integer code.
NS_HD unsigned char f64_to_fp8(double x, bool e4m3) {
    const u64 xbits = f64_bits(x);
    const unsigned char maxnorm = e4m3 ? 0x7E : 0x7B;
    const unsigned char mantissa_mask = e4m3 ? 0x7 : 0x3;
    const unsigned short exp_bias = e4m3 ? 7 : 15;
    const u64 significand_bits = e4m3 ? 4 : 3;
    const u64 mindenorm_o2 = e4m3 ? 0x3F50000000000000ull : 0x3EE0000000000000ull;
    const u64 overflow_threshold = e4m3 ? 0x407D000000000000ull : 0x40EE000000000000ull - 1;
    const u64 minnorm = e4m3 ? 0x3F90000000000000ull : 0x3F10000000000000ull;
    const u64 dp_inf_bits = 0x7FF0000000000000ull;
    const u64 half_ulp = 1ull << (53 - significand_bits - 1);
    const unsigned char sign = (unsigned char)((xbits >> 63) << 7);
    const unsigned char exp =
        (unsigned char)((unsigned short)(((unsigned short)(xbits >> 52) & 0x7FF) - 1023 + exp_bias));
    const unsigned char mantissa = (unsigned char)((xbits >> (53 - significand_bits)) & mantissa_mask);
    const u64 absx = xbits & 0x7FFFFFFFFFFFFFFFull;
    unsigned char res;
    if (absx <= mindenorm_o2) {
        res = 0;
    } else if (absx > dp_inf_bits) {
        res = e4m3 ? 0x7F : (unsigned char)(0x7E | mantissa);
    } else if (absx > overflow_threshold) {
        res = maxnorm;
    } else if (absx >= minnorm) {
        res = (unsigned char)((exp << (significand_bits - 1)) | mantissa);
        const u64 round = xbits & ((half_ulp << 1) - 1);
        if (round > half_ulp || (round == half_ulp && (mantissa & 1) != 0)) res = (unsigned char)(res + 1);
    } else {
        const unsigned char shift = (unsigned char)(1 - exp);
        const unsigned char m = (unsigned char)(mantissa | (1u << (significand_bits - 1)));
        res = (unsigned char)(m >> shift);
        const u64 round = (xbits | (1ull << 52)) & ((half_ulp << (shift + 1)) - 1);
        if (round > (half_ulp << shift) || (round == (half_ulp << shift) && (res & 1) != 0)) {
            res = (unsigned char)(res + 1);
        }
    }
    return (unsigned char)(res | sign);
}

// fp8 -> f64, exact: through f16 as cuda_fp8.hpp's `__nv_cvt_fp8_to_halfraw` (and the
// `float8` crate) do; every fp8 is an f16.
NS_HD double fp8_to_f64(unsigned char x, bool e4m3) {
    unsigned short ur = (unsigned short)((unsigned short)x << 8);
    if (!e4m3) {
        if ((ur & 0x7FFF) > 0x7C00) ur = 0x7FFF;
        return f16_to_f64(ur);
    }
    const unsigned short sign = ur & 0x8000;
    unsigned short exponent = (unsigned short)(((ur & 0x7800) >> 1) + 0x2000);
    unsigned short mantissa = (unsigned short)((ur & 0x0700) >> 1);
    if ((x & 0x7F) == 0x7F) {
        ur = 0x7FFF;
    } else if (exponent == 0x2000) {
        if (mantissa != 0) {
            mantissa = (unsigned short)(mantissa << 1);
            while ((mantissa & 0x0400) == 0) {
                mantissa = (unsigned short)(mantissa << 1);
                exponent = (unsigned short)(exponent - 0x0400);
            }
            mantissa &= 0x03FF;
        } else {
            exponent = 0;
        }
        ur = (unsigned short)(sign | exponent | mantissa);
    } else {
        ur = (unsigned short)(sign | exponent | mantissa);
    }
    return f16_to_f64(ur);
}

// f64 -> integer as Rust's `as` does it: toward zero, saturating at the type's bounds,
// NaN to 0 (a C cast would be undefined out of range). `min` and `max` are exact doubles.
NS_HD i64 f64_to_int_sat(double v, double min, double max) {
    if (is_nan(v)) return 0;
    if (v <= min) return (i64)min;
    if (v >= max) return (i64)max;
    return (i64)v;
}

NS_HD i64 f64_to_i64_sat(double v) {
    if (is_nan(v)) return 0;
    if (v >= 9223372036854775808.0) return (i64)0x7FFFFFFFFFFFFFFFull;
    if (v <= -9223372036854775808.0) return (i64)0x8000000000000000ull;
    return (i64)v;
}

NS_HD u64 f64_to_u64_sat(double v) {
    if (!(v > 0.0)) return 0;  // NaN as well
    if (v >= 18446744073709551616.0) return ~0ull;
    return (u64)v;
}

// The element's bits (in the low bytes) for `v`: ElemType::write_f64.
NS_HD u64 encode_f64(unsigned elem, double v) {
    switch (elem) {
    case ELEM_F32: return f32_bits((float)v);
    case ELEM_F64: return f64_bits(v);
    case ELEM_F16: return f64_to_f16(v);
    case ELEM_BF16: return f64_to_bf16(v);
    case ELEM_I8: return (u64)f64_to_int_sat(v, -128.0, 127.0) & 0xFF;
    case ELEM_U8: return (u64)f64_to_int_sat(v, 0.0, 255.0);
    case ELEM_I16: return (u64)f64_to_int_sat(v, -32768.0, 32767.0) & 0xFFFF;
    case ELEM_U16: return (u64)f64_to_int_sat(v, 0.0, 65535.0);
    case ELEM_I32: return (u64)f64_to_int_sat(v, -2147483648.0, 2147483647.0) & 0xFFFFFFFFull;
    case ELEM_U32: return (u64)f64_to_int_sat(v, 0.0, 4294967295.0);
    case ELEM_I64: return (u64)f64_to_i64_sat(v);
    case ELEM_F8E4M3: return f64_to_fp8(v, true);
    case ELEM_F8E5M2: return f64_to_fp8(v, false);
    default: return f64_to_u64_sat(v);
    }
}

// The element's value as f64: ElemType::read_f64 (exact but for 64-bit integers past
// 2^53, which round to nearest as Rust's `as f64` does).
NS_HD double decode_f64(unsigned elem, u64 bits) {
    switch (elem) {
    case ELEM_F32: return (double)f32_from_bits((unsigned)bits);
    case ELEM_F64: return f64_from_bits(bits);
    case ELEM_F16: return f16_to_f64((unsigned short)bits);
    case ELEM_BF16: return bf16_to_f64((unsigned short)bits);
    case ELEM_I8: return (double)(signed char)bits;
    case ELEM_U8: return (double)(unsigned char)bits;
    case ELEM_I16: return (double)(short)bits;
    case ELEM_U16: return (double)(unsigned short)bits;
    case ELEM_I32: return (double)(int)bits;
    case ELEM_U32: return (double)(unsigned)bits;
    case ELEM_I64: return (double)(i64)bits;
    case ELEM_F8E4M3: return fp8_to_f64((unsigned char)bits, true);
    case ELEM_F8E5M2: return fp8_to_f64((unsigned char)bits, false);
    default: return (double)bits;
    }
}

NS_HD i64 clamp_i64(i64 v, i64 min, i64 max) { return v < min ? min : (v > max ? max : v); }

// An integer as the element: exact and saturating for integer types (the host goes
// through f64, which is the same below 2^53), rounded to nearest for float types.
NS_HD u64 encode_i64(unsigned elem, i64 v) {
    switch (elem) {
    case ELEM_I8: return (u64)clamp_i64(v, -128, 127) & 0xFF;
    case ELEM_U8: return (u64)clamp_i64(v, 0, 255);
    case ELEM_I16: return (u64)clamp_i64(v, -32768, 32767) & 0xFFFF;
    case ELEM_U16: return (u64)clamp_i64(v, 0, 65535);
    case ELEM_I32: return (u64)clamp_i64(v, -2147483648ll, 2147483647ll) & 0xFFFFFFFFull;
    case ELEM_U32: return (u64)clamp_i64(v, 0, 4294967295ll);
    case ELEM_I64: return (u64)v;
    case ELEM_U64: return v < 0 ? 0 : (u64)v;
    default: return encode_f64(elem, (double)v);
    }
}

// A non-negative integer (an index) as the element, as encode_i64.
NS_HD u64 encode_u64(unsigned elem, u64 v) {
    if (!elem_is_float(elem)) {
        if (elem == ELEM_U64) return v;
        return encode_i64(elem, v > 0x7FFFFFFFFFFFFFFFull ? 0x7FFFFFFFFFFFFFFFll : (i64)v);
    }
    return encode_f64(elem, (double)v);
}

// The neighbouring float elements of `bits` (finite or infinite, not NaN): the next value
// up and down, through the signed zeros.
NS_HD u64 float_next_up(unsigned elem, u64 bits) {
    u64 sign = 1ull << (8 * elem_size(elem) - 1);
    if ((bits & ~sign) == 0) return 1;
    return (bits & sign) ? bits - 1 : bits + 1;
}

NS_HD u64 float_next_down(unsigned elem, u64 bits) {
    u64 sign = 1ull << (8 * elem_size(elem) - 1);
    if ((bits & ~sign) == 0) return sign | 1;
    return (bits & sign) ? bits + 1 : bits - 1;
}

// Element `i` of a buffer as bits in the low bytes, and back. On the GPU the buffers are
// the judge's allocations, aligned to their element size; the host build may be handed
// any address, so it copies bytes.
NS_HD u64 load_bits(const unsigned char* p, unsigned elem, u64 i) {
#ifdef __CUDA_ARCH__
    switch (elem_size(elem)) {
    case 1: return p[i];
    case 2: return reinterpret_cast<const unsigned short*>(p)[i];
    case 4: return reinterpret_cast<const unsigned*>(p)[i];
    default: return reinterpret_cast<const u64*>(p)[i];
    }
#else
    unsigned size = elem_size(elem);
    u64 b = 0;
    memcpy(&b, p + i * size, size);  // little-endian host
    return b;
#endif
}

NS_HD void store_bits(unsigned char* p, unsigned elem, u64 i, u64 bits) {
#ifdef __CUDA_ARCH__
    switch (elem_size(elem)) {
    case 1: p[i] = (unsigned char)bits; break;
    case 2: reinterpret_cast<unsigned short*>(p)[i] = (unsigned short)bits; break;
    case 4: reinterpret_cast<unsigned*>(p)[i] = (unsigned)bits; break;
    default: reinterpret_cast<u64*>(p)[i] = bits; break;
    }
#else
    unsigned size = elem_size(elem);
    memcpy(p + i * size, &bits, size);
#endif
}
