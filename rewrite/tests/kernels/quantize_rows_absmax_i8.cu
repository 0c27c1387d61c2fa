// entry: quantize_rows_i8
// arg: x in float rows*cols
// arg: q out int8_t rows*cols
// arg: scales out float rows
// arg: rows int 16384
// arg: cols int 256
// tolerance: 0 1
// expect: applies row-cache: `quantize_rows_kernel`: `x` kept in registers across 2 passes over `cols` (16 per thread), read once
// expect: declines cooperative
// expect: declines shuffle-reduce
#include <cuda_runtime.h>
#include <stdint.h>

#define LANES 16

// Symmetric int8 quantization per row: LANES lanes share a row, find its absolute
// maximum, then write every element divided by the row's scale.
__global__ void quantize_rows_kernel(const float* __restrict__ x, int8_t* __restrict__ q, float* __restrict__ scales,
                                     int rows, int cols)
{
    const int row = (blockIdx.x * blockDim.x + threadIdx.x) / LANES;
    const int lane = threadIdx.x & (LANES - 1);
    const unsigned group = ((1u << LANES) - 1u) << (threadIdx.x & 31u & ~(LANES - 1u));
    if (row >= rows) return;  // a row's lanes leave together
    const size_t base = (size_t)row * cols;

    float amax = 0.f;
    for (int c = lane; c < cols; c += LANES) amax = fmaxf(amax, fabsf(x[base + c]));
    for (int o = LANES / 2; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(group, amax, o, LANES));

    const float scale = amax > 0.f ? amax / 127.f : 1.f;
    const float inv = 1.f / scale;
    for (int c = lane; c < cols; c += LANES) {
        const float v = rintf(x[base + c] * inv);
        q[base + c] = (int8_t)fmaxf(-127.f, fminf(127.f, v));
    }
    if (lane == 0) scales[row] = scale;
}

extern "C" void quantize_rows_i8(const float* x, int8_t* q, float* scales, int rows, int cols, cudaStream_t stream)
{
    const int threads = 256;
    const int blocks = (int)(((long long)rows * LANES + threads - 1) / threads);
    quantize_rows_kernel<<<blocks, threads, 0, stream>>>(x, q, scales, rows, cols);
}
