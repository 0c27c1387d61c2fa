// entry: cast_f32_bf16
// arg: src in float count
// arg: dst out __nv_bfloat16 count
// arg: count int 4194304
// tolerance: 1e-2 1e-2
// expect: declines intrinsics
// expect: applies vectorize
// expect: applies grid-stride
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines unroll
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines fast-divmod
// expect: declines index-width
#include <cuda_runtime.h>
#include <cuda_bf16.h>

// fp32 -> bf16 conversion (round to nearest even).
__global__ void cast_kernel(const float* src, __nv_bfloat16* dst, int count)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < count)
        dst[k] = __float2bfloat16(src[k]);
}

extern "C" void cast_f32_bf16(const float* src, __nv_bfloat16* dst, int count, cudaStream_t stream)
{
    cast_kernel<<<(count + 255) / 256, 256, 0, stream>>>(src, dst, count);
}
