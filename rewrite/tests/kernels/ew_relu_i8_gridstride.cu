// entry: relu_i8
// arg: x in int8_t n
// arg: y out int8_t n
// arg: n int 4194304
// tolerance: 0 0
// expect: applies vectorize
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines grid-stride
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines fast-divmod
// expect: declines index-width
// expect: declines intrinsics
// expect: declines row-cache: `relu_i8_kernel` strides only across the grid, over ranges no fixed number of registers per thread holds
#include <cuda_runtime.h>
#include <stdint.h>

// ReLU on a quantized int8 tensor; grid-stride loop with a capped grid.
__global__ void relu_i8_kernel(const int8_t* x, int8_t* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int8_t v = x[i];
        y[i] = v > 0 ? v : (int8_t)0;
    }
}

extern "C" void relu_i8(const int8_t* x, int8_t* y, int n, cudaStream_t stream)
{
    int blocks = (n + 255) / 256;
    if (blocks > 1024) blocks = 1024;
    if (blocks < 1) blocks = 1;
    relu_i8_kernel<<<blocks, 256, 0, stream>>>(x, y, n);
}
