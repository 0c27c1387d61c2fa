// entry: layernorm_f32
// arg: x in float rows*cols
// arg: gamma in float cols
// arg: beta in float cols
// arg: y out float rows*cols
// arg: rows int 4096
// arg: cols int 2048
// tolerance: 1e-4 1e-4
// expect: applies shuffle-reduce
// expect: applies launch-bounds
// expect: applies unroll
// expect: declines vectorize
// expect: declines cooperative
// expect: declines grid-stride
// expect: applies block-knob: `layernorm_kernel`: block size macro `BLOCK` made a knob (`#ifndef` guard)
// expect: declines fast-divmod
// expect: declines index-width
// expect: declines row-cache: `layernorm_kernel` starts its loops at `tid`, a local copy of `threadIdx.x` (`for (int j = tid; j < cols; j += BLOCK)`); the block-strided loops this recipe takes, like `vectorize`, start at `threadIdx.x` itself
#include <cuda_runtime.h>

#define BLOCK 256

// LayerNorm, one block per row, two shared-memory tree reductions
// (mean, then variance).
__global__ void layernorm_kernel(const float* x, const float* gamma, const float* beta, float* y, int cols)
{
    __shared__ float sdata[BLOCK];
    int row = blockIdx.x;
    int tid = threadIdx.x;

    float local = 0.0f;
    for (int j = tid; j < cols; j += BLOCK)
        local += x[row * cols + j];
    sdata[tid] = local;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    float mean = sdata[0] / (float)cols;
    __syncthreads();   // everyone has read sdata[0] before it is reused

    float lvar = 0.0f;
    for (int j = tid; j < cols; j += BLOCK) {
        float d = x[row * cols + j] - mean;
        lvar += d * d;
    }
    sdata[tid] = lvar;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    float rstd = rsqrtf(sdata[0] / (float)cols + 1e-5f);

    for (int j = tid; j < cols; j += BLOCK)
        y[row * cols + j] = (x[row * cols + j] - mean) * rstd * gamma[j] + beta[j];
}

extern "C" void layernorm_f32(const float* x, const float* gamma, const float* beta, float* y,
                              int rows, int cols, cudaStream_t stream)
{
    layernorm_kernel<<<rows, BLOCK, 0, stream>>>(x, gamma, beta, y, cols);
}
