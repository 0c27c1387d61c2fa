// entry: histc_f32
// arg: x in float n
// arg: counts inout int nbins
// arg: n int 1048576
// arg: nbins int 1024
// tolerance: 0 0
// expect: applies vectorize
// note: the input reads at the index are vectorized; the atomics stay scalar.
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
// expect: declines fast-divmod
// expect: applies block-knob
// expect: applies launch-bounds
// expect: applies coarsen
#include <cuda_runtime.h>

// torch.histc(x, bins=nbins, min=0, max=1) with global atomics; values
// outside [0, 1] are clamped into the edge bins.
__global__ void histc_kernel(const float* x, int* counts, int n, int nbins)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int bin = (int)(x[i] * (float)nbins);
        bin = bin < 0 ? 0 : bin;
        bin = bin >= nbins ? nbins - 1 : bin;
        atomicAdd(&counts[bin], 1);
    }
}

extern "C" void histc_f32(const float* x, int* counts, int n, int nbins, cudaStream_t stream)
{
    histc_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, counts, n, nbins);
}
