// entry: softmax_block_rows
// arg: logits in float rows*cols
// arg: probs out float rows*cols
// arg: rows int 4096
// arg: cols int 4096
// tolerance: 1e-5 1e-6
// expect: declines prefetch: `softmax_block_kernel`: the loop at line 29: its body is not braced; the loop at line 32: its update `s >>= 1` is not a step; the loop at line 40: its body is not braced; the loop at line 43: its update `s >>= 1` is not a step; the loop at line 49: its body is not braced
// expect: declines tensor-tile
// expect: applies shuffle-reduce
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines vectorize
// expect: declines cooperative
// expect: declines grid-stride
// expect: declines index-width
#include <cuda_runtime.h>
#include <cfloat>

// Softmax with one 128-thread block per row: a max tree, then a sum tree.
__global__ void softmax_block_kernel(const float* logits, float* probs, int cols)
{
    __shared__ float buf[128];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    const float* in = logits + row * cols;
    float* out = probs + row * cols;

    float m = -FLT_MAX;
    for (int c = tid; c < cols; c += blockDim.x) m = fmaxf(m, in[c]);
    buf[tid] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) buf[tid] = fmaxf(buf[tid], buf[tid + s]);
        __syncthreads();
    }
    float row_max = buf[0];
    __syncthreads();

    float sum = 0.f;
    for (int c = tid; c < cols; c += blockDim.x) sum += expf(in[c] - row_max);
    buf[tid] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) buf[tid] += buf[tid + s];
        __syncthreads();
    }
    float inv_sum = 1.0f / buf[0];

    for (int c = tid; c < cols; c += blockDim.x) out[c] = expf(in[c] - row_max) * inv_sum;
}

extern "C" void softmax_block_rows(const float* logits, float* probs, int rows, int cols, cudaStream_t stream)
{
    softmax_block_kernel<<<rows, 128, 0, stream>>>(logits, probs, cols);
}
