// entry: histogram_u8
// arg: data in uint8_t n
// arg: hist inout int 256
// arg: n int 4194304
// tolerance: 0 0
// expect: applies vectorize
// note: the grid-stride input loop is vectorized; the shared-memory atomics stay scalar.
// expect: declines cooperative
// expect: declines grid-stride
// expect: declines shuffle-reduce
// expect: declines intrinsics
// expect: declines fast-divmod
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines row-cache: `histogram_u8_kernel` reads no buffer at the loop index in two of its passes over `NUM_BINS`
#include <cuda_runtime.h>
#include <stdint.h>

#define NUM_BINS 256

// 256-bin byte histogram: per-block shared-memory sub-histogram, then one
// global atomicAdd per bin per block.
__global__ void histogram_u8_kernel(const uint8_t* data, int* hist, int n)
{
    __shared__ int local[NUM_BINS];
    for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x)
        local[b] = 0;
    __syncthreads();

    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[data[i]], 1);
    __syncthreads();

    for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) {
        int cnt = local[b];
        if (cnt) atomicAdd(&hist[b], cnt);
    }
}

extern "C" void histogram_u8(const uint8_t* data, int* hist, int n, cudaStream_t stream)
{
    int blocks = (n + 255) / 256;
    if (blocks > 120) blocks = 120;
    if (blocks < 1) blocks = 1;
    histogram_u8_kernel<<<blocks, 256, 0, stream>>>(data, hist, n);
}
