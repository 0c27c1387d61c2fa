// entry: masked_fill_f32
// arg: x in float n
// arg: mask in uint8_t n
// arg: out out float n
// arg: fill float
// arg: n int 1048576
// tolerance: 0 0
// expect: applies vectorize: `masked_fill_kernel`: 4 elements per thread, mask 4B in, out 16B out through registers; `x` read through a register window: the run (16B) plus 0 before and 0 after (1 read site(s))
// expect: applies grid-stride
// expect: applies read-only
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines unroll
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines intrinsics
// expect: declines fast-divmod
// expect: declines index-width
#include <cuda_runtime.h>
#include <stdint.h>

// out = mask ? fill : x   (attention-mask style, bool mask stored as bytes)
__global__ void masked_fill_kernel(const float* x, const uint8_t* mask, float* out, float fill, int n)
{
    int gid = blockIdx.x * blockDim.x + threadIdx.x;
    if (gid < n) {
        out[gid] = mask[gid] ? fill : x[gid];
    }
}

extern "C" void masked_fill_f32(const float* x, const uint8_t* mask, float* out, float fill, int n,
                                cudaStream_t stream)
{
    masked_fill_kernel<<<(n + 511) / 512, 512, 0, stream>>>(x, mask, out, fill, n);
}
