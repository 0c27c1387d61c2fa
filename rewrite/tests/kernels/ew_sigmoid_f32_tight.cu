// entry: sigmoid_f32
// arg: x in float n
// arg: y out float n
// arg: n int 1048576
// tolerance: 1e-6 1e-6
// expect: applies vectorize
// expect: applies grid-stride
// expect: applies launch-bounds
// expect: applies block-knob: `sigmoid_kernel`: block size macro `THREADS` made a knob (`#ifndef` guard)
// expect: declines intrinsics
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
// expect: declines index-width
// expect: declines fast-divmod
#include <cuda_runtime.h>

#define THREADS 128

// Logistic sigmoid. The caller compares against a double-precision
// reference, so accurate expf is required here.
__global__ void sigmoid_kernel(const float* x, float* y, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = 1.0f / (1.0f + expf(-x[i]));
}

extern "C" void sigmoid_f32(const float* x, float* y, int n, cudaStream_t stream)
{
    sigmoid_kernel<<<(n + THREADS - 1) / THREADS, THREADS, 0, stream>>>(x, y, n);
}
