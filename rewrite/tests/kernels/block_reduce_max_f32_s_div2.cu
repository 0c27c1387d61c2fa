// entry: block_max_f32
// arg: values in float count
// arg: block_max out float 256
// arg: count int 4194304
// tolerance: 1e-6 1e-6
// expect: applies shuffle-reduce
// expect: applies launch-bounds
// expect: applies block-knob: `block_max_kernel`: block size macro `BLOCK` made a knob (`#ifndef` guard)
// expect: declines vectorize
// expect: declines cooperative
// expect: declines grid-stride
// expect: declines fast-divmod
#include <cuda_runtime.h>
#include <cfloat>

#define BLOCK 512
#define MAX_BLOCKS 256

// Per-block maximum (first pass of an absmax/amax computation). Each thread
// first folds a grid-strided slice, then the block reduces in shared memory.
__global__ void block_max_kernel(const float* values, float* block_max, int count)
{
    __shared__ float smax[BLOCK];
    int tid = threadIdx.x;

    float m = -FLT_MAX;
    for (int i = blockIdx.x * BLOCK + tid; i < count; i += gridDim.x * BLOCK)
        m = fmaxf(m, values[i]);
    smax[tid] = m;
    __syncthreads();

    for (int s = BLOCK / 2; s > 0; s /= 2) {
        if (tid < s)
            smax[tid] = fmaxf(smax[tid], smax[tid + s]);
        __syncthreads();
    }
    if (tid == 0)
        block_max[blockIdx.x] = smax[0];
}

extern "C" void block_max_f32(const float* values, float* block_max, int count, cudaStream_t stream)
{
    int blocks = (count + BLOCK - 1) / BLOCK;
    if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
    if (blocks < 1) blocks = 1;
    block_max_kernel<<<blocks, BLOCK, 0, stream>>>(values, block_max, count);
}
