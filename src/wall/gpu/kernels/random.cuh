// Random bits for element i of an input set, from a counter: any thread can draw any
// element's bits, in any order, on any grid, and always get the same ones.
//
// The construction is SplitMix64 (Steele, Lea and Flood 2014; the host generator uses it
// too) in counter form, keyed twice: a key pair (k0, k1) is hashed from (seed, stream, a
// domain constant); draw c of a set is mix64(mix64(k0 + (c + 1) * GOLDEN) ^ k1). The
// first round is exactly SplitMix64's output c of a generator started at k0; the second,
// keyed by k1, makes two sets whose k0 happen to lie a few steps apart on SplitMix64's
// sequence (the only way two plain SplitMix64 streams overlap) share no outputs.
// Not a cryptographic generator: every step is invertible, so the judge's seeds must be
// unpredictable themselves (see GenSpec in mod.rs).
#pragma once

#include "specs.cuh"

#define NS_GOLDEN 0x9E3779B97F4A7C15ull

// SplitMix64's finalizer: a bijection on 64 bits with full avalanche.
NS_HD u64 mix64(u64 z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

struct Key {
    u64 k0, k1;
};

// Domains keep the bits of a set's values apart from those of its permutation.
#define NS_DOMAIN_VALUES 0x6e69676874736866ull  // "nightshf"
#define NS_DOMAIN_PERM 0x7065726d75746531ull    // "permute1"

// The key of (seed, stream): for one seed, distinct streams give distinct k0 (an injective
// map of the stream into a bijection); distinct seeds give unrelated ones.
NS_HD Key derive_key(u64 seed, u64 stream, u64 domain) {
    u64 h = mix64(seed ^ domain);
    u64 k0 = mix64(h + (stream + 1) * NS_GOLDEN);
    return Key{k0, mix64(k0 ^ domain ^ NS_GOLDEN)};
}

NS_HD u64 draw_bits(Key key, u64 counter) { return mix64(mix64(key.k0 + (counter + 1) * NS_GOLDEN) ^ key.k1); }

// Uniform doubles from the top 53 bits: [0, 1) and (0, 1].
NS_HD double unit_closed_open(u64 bits) { return (double)(bits >> 11) * (1.0 / 9007199254740992.0); }
NS_HD double unit_open_closed(u64 bits) { return (double)((bits >> 11) + 1) * (1.0 / 9007199254740992.0); }

// The high 64 bits of a 64x64-bit product: `bits` scaled into [0, span) (bias below
// span / 2^64, nothing any test of a kernel could see).
NS_HD u64 mul_high(u64 a, u64 b) {
#ifdef __CUDA_ARCH__
    return __umul64hi(a, b);
#else
    return (u64)(((unsigned __int128)a * b) >> 64);
#endif
}

// A keyed bijection on [0, count): a Feistel network on the smallest power of two that
// holds count (n bits, split into halves of ceil(n/2) and floor(n/2) bits whose roles
// swap each round, so odd n works), walked along its cycle until it lands below count.
// The walk ends (the cycle through x < count returns to x at the latest), after under
// two steps on average since 2^n < 2 count; its bound is 2^n - count + 1 steps.
// Each round's function is mix64 of the half keyed by a round key.
#define NS_PERM_ROUNDS 8

struct Perm {
    u64 count;
    unsigned wl, wr;  // widths of the left (high) and right (low) halves
    u64 round_key[NS_PERM_ROUNDS];
};

NS_HD u64 low_mask(unsigned w) { return w >= 64 ? ~0ull : (1ull << w) - 1; }

NS_HD Perm make_perm(u64 count, u64 seed, u64 stream) {
    Perm p;
    p.count = count;
    unsigned n = 0;
    while (n < 64 && (1ull << n) < count) ++n;
    p.wl = (n + 1) / 2;
    p.wr = n / 2;
    Key key = derive_key(seed, stream, NS_DOMAIN_PERM);
    for (int r = 0; r < NS_PERM_ROUNDS; ++r) p.round_key[r] = draw_bits(key, (u64)r);
    return p;
}

NS_HD u64 feistel(const Perm& p, u64 x) {
    unsigned a = p.wl, b = p.wr;  // current widths of l and r
    u64 l = x >> b, r = x & low_mask(b);
    for (int round = 0; round < NS_PERM_ROUNDS; ++round) {
        u64 next_r = l ^ (mix64(r ^ p.round_key[round]) & low_mask(a));
        l = r;
        r = next_r;
        unsigned t = a;
        a = b;
        b = t;
    }
    // An even number of rounds: the widths are back where they started.
    return (l << b) | r;
}

// perm(i) for i < count.
NS_HD u64 permute(const Perm& p, u64 i) {
    if (p.count <= 1) return 0;
    u64 x = i;
    do {
        x = feistel(p, x);
    } while (x >= p.count);
    return x;
}
