// entry: rmsnorm_bf16_rows
// arg: x in __nv_bfloat16 rows*hidden
// arg: weight in __nv_bfloat16 hidden
// arg: y out __nv_bfloat16 rows*hidden
// arg: rows int 4096
// arg: hidden int 2048
// arg: eps float
// tolerance: 2e-2 2e-2
// expect: applies row-cache: `rmsnorm_bf16_kernel`: `xr` kept in registers across 2 passes over `hidden` (8 per thread), read once
// expect: declines shuffle-reduce
// expect: declines cooperative
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__device__ __forceinline__ float warp_allreduce_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// RMSNorm over bf16 rows, one block per row: the block's threads stride over the
// row twice, once for the sum of squares and once to write the scaled values.
__global__ void rmsnorm_bf16_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ weight,
                                    __nv_bfloat16* __restrict__ y, int hidden, float eps)
{
    __shared__ float warp_sums[32];
    const __nv_bfloat16* xr = x + blockIdx.x * hidden;
    __nv_bfloat16* yr = y + blockIdx.x * hidden;

    float ss = 0.f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
        const float v = __bfloat162float(xr[i]);
        ss += v * v;
    }
    ss = warp_allreduce_sum(ss);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
    __syncthreads();
    float total = 0.f;
    const int warps = blockDim.x >> 5;
    for (int w = 0; w < warps; ++w) total += warp_sums[w];
    const float inv_rms = rsqrtf(total / (float)hidden + eps);

    for (int i = threadIdx.x; i < hidden; i += blockDim.x)
        yr[i] = __float2bfloat16(__bfloat162float(xr[i]) * inv_rms * __bfloat162float(weight[i]));
}

extern "C" void rmsnorm_bf16_rows(const __nv_bfloat16* x, const __nv_bfloat16* weight, __nv_bfloat16* y, int rows,
                                  int hidden, float eps, cudaStream_t stream)
{
    rmsnorm_bf16_kernel<<<rows, 256, 0, stream>>>(x, weight, y, hidden, eps);
}
