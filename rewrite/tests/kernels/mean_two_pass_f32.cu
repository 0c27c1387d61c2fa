// entry: mean_f32
// arg: x in float n
// arg: partials out float (n + 255) / 256
// arg: mean out float 1
// arg: n int 1048576
// tolerance: 1e-5 1e-6
// expect: applies shuffle-reduce
// expect: applies launch-bounds
// expect: applies block-knob: `partial_sum_kernel`: block size macro `BLOCK` made a knob (`#ifndef` guard)
// expect: declines vectorize
// expect: declines cooperative
// expect: declines grid-stride
#include <cuda_runtime.h>

#define BLOCK 256

// Pass 1: one partial sum per block.
__global__ void partial_sum_kernel(const float* x, float* partials, int n)
{
    __shared__ float sdata[BLOCK];
    int tid = threadIdx.x;
    int i = blockIdx.x * BLOCK + tid;
    sdata[tid] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) partials[blockIdx.x] = sdata[0];
}

// Pass 2: a single block folds the partials and divides by n.
__global__ void finalize_mean_kernel(const float* partials, float* mean, int num_partials, int n)
{
    __shared__ float sdata[BLOCK];
    int tid = threadIdx.x;
    float acc = 0.0f;
    for (int k = tid; k < num_partials; k += BLOCK) acc += partials[k];
    sdata[tid] = acc;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) mean[0] = sdata[0] / (float)n;
}

extern "C" void mean_f32(const float* x, float* partials, float* mean, int n, cudaStream_t stream)
{
    int num_partials = (n + BLOCK - 1) / BLOCK;
    partial_sum_kernel<<<num_partials, BLOCK, 0, stream>>>(x, partials, n);
    finalize_mean_kernel<<<1, BLOCK, 0, stream>>>(partials, mean, num_partials, n);
}
