// entry: warp_row_sum
// arg: in in float rows*cols
// arg: out out float rows
// arg: rows int 8192
// arg: cols int 2048
// tolerance: 1e-4 1e-4
// expect: applies unroll
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: applies vectorize: `warp_row_sum_kernel`: lane-strided loop over `cols`: 4 per step (in 16B in)
// expect: declines fast-divmod
// expect: declines intrinsics
// expect: declines row-cache: `warp_row_sum_kernel` makes one pass over each row (strided loops over `cols`): no row is read twice
// expect: declines coarsen: `warp_row_sum_kernel` calls `warp_sum`, which uses warp collectives: a thread that left one block early would meet them in the next
#include <cuda_runtime.h>

#define WARP 32
#define WARPS_PER_BLOCK (256 / WARP)

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int off = WARP / 2; off > 0; off >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

// Already-optimized row sum: one warp per row, lanes stride over the row,
// then a warp-shuffle reduction.
__global__ void warp_row_sum_kernel(const float* in, float* out, int rows, int cols)
{
    int warp_id = (blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    int lane = threadIdx.x & (WARP - 1);
    if (warp_id >= rows) return;

    float s = 0.0f;
    for (int j = lane; j < cols; j += WARP)
        s += in[warp_id * cols + j];
    s = warp_sum(s);
    if (lane == 0) out[warp_id] = s;
}

extern "C" void warp_row_sum(const float* in, float* out, int rows, int cols, cudaStream_t stream)
{
    int blocks = (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
    warp_row_sum_kernel<<<blocks, 256, 0, stream>>>(in, out, rows, cols);
}
