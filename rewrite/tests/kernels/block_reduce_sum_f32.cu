// entry: partial_sums_f32
// arg: x in float n
// arg: partial out float (n + 255) / 256
// arg: n int 1048576
// tolerance: 1e-4 1e-5
// expect: declines prefetch: `block_sum_kernel`: the loop at line 29: its update `s >>= 1` is not a step
// expect: declines tensor-tile
// expect: applies shuffle-reduce
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines vectorize
// expect: declines cooperative
// expect: declines grid-stride
// expect: declines fast-divmod
// expect: declines intrinsics
// expect: declines coarsen: `block_sum_kernel` synchronizes its block: coarse blocks would need a barrier between the blocks they run
#include <cuda_runtime.h>

// Classic reduction #3 (sequential addressing): one partial sum per block.
__global__ void block_sum_kernel(const float* x, float* partial, int n)
{
    __shared__ float sdata[256];
    unsigned int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;

    sdata[tid] = (i < n) ? x[i] : 0.0f;
    __syncthreads();

    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }

    if (tid == 0) partial[blockIdx.x] = sdata[0];
}

extern "C" void partial_sums_f32(const float* x, float* partial, int n, cudaStream_t stream)
{
    block_sum_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, partial, n);
}
