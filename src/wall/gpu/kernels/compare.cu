// Outputs compared with reference outputs on the GPU, with verify::compare's semantics:
// the judge's kernel (PTX committed beside this file, rebuilt by scripts/ptx.sh). Launch
// 1-D, any grid, any block size (256 is what the judge uses).
#include "compare.cuh"

__device__ CmpAcc shfl_down(unsigned mask, const CmpAcc& a, unsigned offset) {
    return CmpAcc{__shfl_down_sync(mask, a.mismatches, offset), __shfl_down_sync(mask, a.first_mismatch, offset),
                  __shfl_down_sync(mask, a.max_abs, offset),    __shfl_down_sync(mask, a.max_rel, offset),
                  __shfl_down_sync(mask, a.nonfinite, offset),  __shfl_down_sync(mask, a.first_nonfinite, offset)};
}

// Adds the comparison of `got` with `expected` (spec.count elements of spec.elem) into
// *result, which the judge zeroes except first_mismatch and first_expected_nonfinite
// (ULLONG_MAX). Each warp merges its lanes' findings first, so a launch costs at most six
// atomics a warp, two for a passing output.
extern "C" __global__ void nightshift_compare(const unsigned char* got, const unsigned char* expected, CmpSpec spec,
                                              CmpResult* result) {
    u64 begin = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    CmpAcc acc = compare_thread(got, expected, spec, begin, (u64)gridDim.x * blockDim.x);

    // The lanes this warp has: a block size that is not a multiple of 32 leaves the last
    // warp short, and a shuffle may name only lanes that exist.
    unsigned lane = threadIdx.x & 31u;
    unsigned live = blockDim.x - (threadIdx.x - lane);
    if (live > 32u) live = 32u;
    unsigned mask = live == 32u ? 0xFFFFFFFFu : (1u << live) - 1u;
    for (unsigned offset = 16; offset > 0; offset >>= 1) {
        CmpAcc other = shfl_down(mask, acc, offset);
        if (lane + offset < live) acc = cmp_acc_merge(acc, other);
    }
    if (lane == 0) publish(result, acc);
}
