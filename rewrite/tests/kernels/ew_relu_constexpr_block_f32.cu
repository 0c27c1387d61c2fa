// entry: relu_f32
// arg: x in float n
// arg: y out float n
// arg: n int 16777216
// tolerance: 0 0
// expect: applies launch-bounds: `relu_kernel`: __launch_bounds__(kBlock, NS_MIN_BLOCKS = 2)
// expect: applies block-knob: `relu_kernel`: block size `kBlock` = 128 as `NS_BLOCK_RELU_KERNEL`
// expect: declines index-width: `relu_kernel` does its index arithmetic in 32 bits already
#include <cuda_runtime.h>

// The block size is a file-scope constexpr that the kernel strides by too.
constexpr int kBlock = 128;

__global__ void relu_kernel(const float* x, float* y, int n)
{
    int i = blockIdx.x * kBlock + threadIdx.x;
    if (i < n) {
        y[i] = fmaxf(x[i], 0.0f);
    }
}

extern "C" void relu_f32(const float* x, float* y, int n, cudaStream_t stream)
{
    relu_kernel<<<(n + kBlock - 1) / kBlock, kBlock, 0, stream>>>(x, y, n);
}
