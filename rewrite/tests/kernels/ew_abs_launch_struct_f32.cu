// entry: abs_f32
// arg: x in float n
// arg: y out float n
// arg: n long 16777216
// tolerance: 0 0
// expect: declines launch-bounds: the block size of `abs_kernel` is not a compile-time constant: `cfg.block` is a member whose type this recipe does not follow
// expect: declines block-knob: `abs_kernel` has no grid cap in its launcher, and its block size `cfg.block` is a member whose type this recipe does not follow
// expect: declines index-width: the grid of a launch of `abs_kernel` is `cfg.grid`, a member whose type this recipe does not follow, so a thread-count check cannot tell a number from a dim3
// expect: declines coarsen
#include <cuda_runtime.h>

// The launcher takes its whole shape from a configuration struct a helper fills in.
struct LaunchShape {
    dim3 grid;
    dim3 block;
};

static LaunchShape shape_for(long long n)
{
    LaunchShape s;
    s.block = dim3(256);
    s.grid = dim3((unsigned)((n + 255) / 256));
    return s;
}

__global__ void abs_kernel(const float* x, float* y, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = fabsf(x[i]);
    }
}

extern "C" void abs_f32(const float* x, float* y, long long n, cudaStream_t stream)
{
    const LaunchShape cfg = shape_for(n);
    abs_kernel<<<cfg.grid, cfg.block, 0, stream>>>(x, y, n);
}
