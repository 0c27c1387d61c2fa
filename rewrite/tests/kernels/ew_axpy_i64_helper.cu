// entry: saxpy_i64
// arg: alpha float
// arg: x in float n
// arg: y inout float n
// arg: n long 1048576
// tolerance: 1e-6 1e-6
// expect: applies vectorize
// expect: applies index-width
// expect: applies grid-stride
// expect: applies read-only
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines fast-divmod
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
// expect: declines intrinsics
#include <cuda_runtime.h>
#include <stdint.h>

__device__ __forceinline__ float axpy_op(float a, float xv, float yv)
{
    return a * xv + yv;
}

// BLAS-style saxpy: y <- alpha * x + y, int64 element count.
__global__ void saxpy_kernel(float alpha, const float* x, float* y, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = axpy_op(alpha, x[i], y[i]);
    }
}

extern "C" void saxpy_i64(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream)
{
    unsigned int grid = (unsigned int)((n + 127) / 128);
    saxpy_kernel<<<grid, 128, 0, stream>>>(alpha, x, y, n);
}
