// Input sets generated on the GPU, and checked there: the judge's kernels (PTX committed
// beside this file, rebuilt by scripts/ptx.sh). Launch 1-D, any grid, any block size (256
// is what the judge uses); each thread takes elements i, i + grid threads, ...
#include "generate.cuh"

__device__ u64 global_thread() { return (u64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ u64 grid_threads() { return (u64)gridDim.x * blockDim.x; }

// Fills spec.count elements of `out` with the set (seed, stream) of spec's distribution.
extern "C" __global__ void nightshift_generate(unsigned char* out, GenSpec spec) {
    GenPlan g = make_plan(spec);
    generate_thread(out, g, global_thread(), grid_threads());
}

// Lowers *first_bad (the judge sets it to ULLONG_MAX) to the first element of `buf` whose
// bits differ from what nightshift_generate writes for `spec`: at most one atomic a
// thread, none for a buffer that is intact.
extern "C" __global__ void nightshift_check_generated(const unsigned char* buf, GenSpec spec,
                                                      unsigned long long* first_bad) {
    GenPlan g = make_plan(spec);
    note_first_bad(first_bad, check_thread(buf, g, global_thread(), grid_threads()));
}
