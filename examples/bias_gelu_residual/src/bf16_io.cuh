// bf16 loads and stores with fp32 math in between.
#pragma once
#include <cuda_bf16.h>

__device__ __forceinline__ float load_f32(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_bf16(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }
