// entry: silu_forward
// arg: input in float n
// arg: output out float n
// arg: n int 1048576
// tolerance: 1e-3 1e-4
// expect: applies intrinsics
// expect: applies vectorize
// expect: applies grid-stride
// expect: applies block-knob
// expect: applies launch-bounds
// expect: applies read-only
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
// expect: declines fast-divmod
// expect: declines index-width
#include <cuda_runtime.h>

// SiLU / swish: x * sigmoid(x), written as a division.
__global__ void silu_kernel(const float* input, float* output, int n)
{
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < n) {
        float v = input[tid];
        output[tid] = v / (1.0f + expf(-v));
    }
}

extern "C" void silu_forward(const float* input, float* output, int n, cudaStream_t stream)
{
    dim3 grid((n + 255) / 256);
    silu_kernel<<<grid, 256, 0, stream>>>(input, output, n);
}
