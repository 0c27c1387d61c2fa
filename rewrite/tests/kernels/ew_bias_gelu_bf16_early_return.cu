// entry: bias_gelu_bf16
// arg: x in __nv_bfloat16 rows*cols
// arg: bias in __nv_bfloat16 cols
// arg: y out __nv_bfloat16 rows*cols
// arg: rows int 2048
// arg: cols int 4096
// tolerance: 2e-2 2e-2
// expect: applies vectorize
// expect: applies fast-divmod
// expect: applies intrinsics
// expect: applies grid-stride
// expect: applies read-only
// expect: applies launch-bounds
// expect: applies block-knob: `bias_gelu_kernel`: block size macro `BLOCK` made a knob (`#ifndef` guard)
// expect: declines index-width
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#define BLOCK 256

// Exact (erf-based) GELU, as in the reference PyTorch implementation.
__device__ __forceinline__ float gelu_erf(float v)
{
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

// y[r, c] = gelu(x[r, c] + bias[c]) on a row-major [rows, cols] activation.
__global__ void bias_gelu_kernel(const __nv_bfloat16* x, const __nv_bfloat16* bias,
                                 __nv_bfloat16* y, int rows, int cols)
{
    int total = rows * cols;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;

    int col = idx % cols;
    float v = __bfloat162float(x[idx]) + __bfloat162float(bias[col]);
    y[idx] = __float2bfloat16(gelu_erf(v));
}

extern "C" void bias_gelu_bf16(const __nv_bfloat16* x, const __nv_bfloat16* bias, __nv_bfloat16* y,
                               int rows, int cols, cudaStream_t stream)
{
    int total = rows * cols;
    int grid = (total + BLOCK - 1) / BLOCK;
    bias_gelu_kernel<<<grid, BLOCK, 0, stream>>>(x, bias, y, rows, cols);
}
