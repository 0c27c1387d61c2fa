// entry: global_min_i32
// arg: data in int n
// arg: result inout int 1
// arg: n int 1048576
// tolerance: 0 0
// expect: applies shuffle-reduce
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines vectorize
// expect: declines cooperative
// expect: declines grid-stride
// expect: declines intrinsics
// expect: declines fast-divmod
#include <cuda_runtime.h>
#include <climits>

// Minimum of an int array: shared-memory tree per block, atomicMin across blocks.
__global__ void min_reduce_kernel(const int* data, int* result, int n)
{
    __shared__ int smin[256];
    int tid = threadIdx.x;
    int gid = blockIdx.x * blockDim.x + tid;

    smin[tid] = gid < n ? data[gid] : INT_MAX;
    __syncthreads();

    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) smin[tid] = min(smin[tid], smin[tid + s]);
        __syncthreads();
    }
    if (tid == 0) atomicMin(result, smin[0]);
}

extern "C" void global_min_i32(const int* data, int* result, int n, cudaStream_t stream)
{
    min_reduce_kernel<<<(n + 255) / 256, 256, 0, stream>>>(data, result, n);
}
