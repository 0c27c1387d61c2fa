// entry: ddot
// arg: a in double n
// arg: b in double n
// arg: out inout double 1
// arg: n int 2097152
// tolerance: 1e-9 1e-9
// expect: declines prefetch: `ddot_kernel`: the loop at line 28: its body is not braced; the loop at line 34: its update `stride >>= 1` is not a step
// expect: declines tensor-tile
// expect: applies shuffle-reduce
// expect: applies launch-bounds
// expect: applies block-knob
// note: the launcher caps the grid with a literal, which block-knob turns into a knob.
// expect: declines vectorize
// expect: declines cooperative
// expect: declines grid-stride
// expect: declines intrinsics
#include <cuda_runtime.h>

#define THREADS 128

// Double-precision dot product, accumulated into *out with atomicAdd.
__global__ void ddot_kernel(const double* a, const double* b, double* out, int n)
{
    __shared__ double cache[THREADS];
    int tid = threadIdx.x;

    double sum = 0.0;
    for (int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x)
        sum += a[i] * b[i];
    cache[tid] = sum;
    __syncthreads();

    // tree reduction in shared memory
    for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
        if (tid < stride)
            cache[tid] += cache[tid + stride];
        __syncthreads();
    }
    if (tid == 0)
        atomicAdd(out, cache[0]);
}

extern "C" void ddot(const double* a, const double* b, double* out, int n, cudaStream_t stream)
{
    int blocks = (n + THREADS - 1) / THREADS;
    if (blocks > 512) blocks = 512;
    if (blocks < 1) blocks = 1;
    ddot_kernel<<<blocks, THREADS, 0, stream>>>(a, b, out, n);
}
