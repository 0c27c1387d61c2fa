// The judge kernels' element logic built for the CPU (tests/judge_kernels.rs): the same
// headers the kernels include, each entry point running the per-thread functions of a
// launch of `threads` grid threads one thread after another, so the tests see what the
// GPU would compute, grid-stride partition and merging included.
#include "compare.cuh"
#include "generate.cuh"

extern "C" {

void nightshift_host_generate(unsigned char* out, GenSpec spec, u64 threads) {
    GenPlan g = make_plan(spec);
    for (u64 t = 0; t < threads; ++t) generate_thread(out, g, t, threads);
}

u64 nightshift_host_check_generated(const unsigned char* buf, GenSpec spec, u64 threads) {
    GenPlan g = make_plan(spec);
    u64 first_bad = ~0ull;  // what the judge initialises
    for (u64 t = 0; t < threads; ++t) note_first_bad(&first_bad, check_thread(buf, g, t, threads));
    return first_bad;
}

// `result` initialised by the caller as the judge does; threads merged in warps of 32 as
// the kernel's shuffles do, each warp published once.
void nightshift_host_compare(const unsigned char* got, const unsigned char* expected, CmpSpec spec, u64 threads,
                             CmpResult* result) {
    for (u64 warp = 0; warp < threads; warp += 32) {
        CmpAcc acc = cmp_acc_empty();
        for (u64 t = warp; t < warp + 32 && t < threads; ++t)
            acc = cmp_acc_merge(acc, compare_thread(got, expected, spec, t, threads));
        publish(result, acc);
    }
}

u64 nightshift_host_encode(unsigned elem, double v) { return encode_f64(elem, v); }

double nightshift_host_decode(unsigned elem, u64 bits) { return decode_f64(elem, bits); }

// Sizes and offsets as C lays the structs out, for the Rust mirrors to match.
void nightshift_host_layout(u64* out) {
    u64 v[] = {sizeof(GenSpec),
               offsetof(GenSpec, count),
               offsetof(GenSpec, seed),
               offsetof(GenSpec, stream),
               offsetof(GenSpec, dist),
               offsetof(GenSpec, elem),
               offsetof(GenSpec, a),
               offsetof(GenSpec, b),
               offsetof(GenSpec, lo),
               offsetof(GenSpec, hi),
               sizeof(CmpSpec),
               offsetof(CmpSpec, count),
               offsetof(CmpSpec, elem),
               offsetof(CmpSpec, pad),
               offsetof(CmpSpec, rtol),
               offsetof(CmpSpec, atol),
               sizeof(CmpResult),
               offsetof(CmpResult, mismatches),
               offsetof(CmpResult, first_mismatch),
               offsetof(CmpResult, max_abs_err_bits),
               offsetof(CmpResult, max_rel_err_bits),
               offsetof(CmpResult, expected_nonfinite),
               offsetof(CmpResult, first_expected_nonfinite)};
    for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]); ++i) out[i] = v[i];
}
}
