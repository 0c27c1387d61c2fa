// entry: scale_shift_f16
// arg: x in half n
// arg: y out half n
// arg: alpha float
// arg: beta float
// arg: n long 2097152
// tolerance: 1e-3 1e-3
// expect: applies vectorize
// expect: applies index-width
// expect: applies read-only
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines grid-stride
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines fast-divmod
// expect: declines intrinsics
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

// y = alpha * x + beta in fp16 storage, fp32 math. Written with 64-bit
// indices "to be safe" for huge tensors.
__global__ void scale_shift_half_kernel(const __half* x, __half* y, float alpha, float beta, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = __half2float(x[i]);
        y[i] = __float2half(v * alpha + beta);
    }
}

extern "C" void scale_shift_f16(const __half* x, __half* y, float alpha, float beta, int64_t n,
                                cudaStream_t stream)
{
    int64_t want = (n + 511) / 512;
    int blocks = want > 2048 ? 2048 : (int)want;
    if (blocks < 1) blocks = 1;
    scale_shift_half_kernel<<<blocks, 512, 0, stream>>>(x, y, alpha, beta, (size_t)n);
}
