// entry: dequant_i8
// arg: q in int8_t n
// arg: y out float n
// arg: scale float
// arg: n int 4194304
// tolerance: 1e-6 1e-6
// expect: declines unroll
// expect: declines shuffle-reduce
// expect: declines intrinsics
// expect: declines fast-divmod
// expect: declines index-width
// expect: applies block-knob
// expect: applies launch-bounds
#include <cuda_runtime.h>
#include <stdint.h>

#define ELEMS_PER_THREAD 4

// Per-tensor int8 -> fp32 dequantization, 4 consecutive elements per thread.
__global__ void dequant_i8_kernel(const int8_t* q, float* y, float scale, int n)
{
    int base = (blockIdx.x * blockDim.x + threadIdx.x) * ELEMS_PER_THREAD;
#pragma unroll
    for (int k = 0; k < ELEMS_PER_THREAD; ++k) {
        int idx = base + k;
        if (idx < n) y[idx] = scale * (float)q[idx];
    }
}

extern "C" void dequant_i8(const int8_t* q, float* y, float scale, int n, cudaStream_t stream)
{
    int threads_needed = (n + ELEMS_PER_THREAD - 1) / ELEMS_PER_THREAD;
    dequant_i8_kernel<<<(threads_needed + 255) / 256, 256, 0, stream>>>(q, y, scale, n);
}
