// entry: nchw_to_nhwc
// arg: src in float n*c*h*w
// arg: dst out float n*c*h*w
// arg: n int 16
// arg: c int 64
// arg: h int 56
// arg: w int 56
// tolerance: 0 0
// expect: applies fast-divmod
// expect: applies grid-stride
// expect: applies read-only
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
// expect: declines intrinsics
// expect: declines index-width
#include <cuda_runtime.h>

// Layout conversion NCHW -> NHWC. Threads are indexed by the output (NHWC)
// position, whose coordinates are decoded with div/mod by the run-time dims.
__global__ void nchw_to_nhwc_kernel(const float* src, float* dst, int n, int c, int h, int w)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int total = n * c * h * w;
    if (i < total) {
        int ci = i % c;
        int t = i / c;
        int wi = t % w;
        t /= w;
        int hi = t % h;
        int ni = t / h;
        dst[i] = src[((ni * c + ci) * h + hi) * w + wi];
    }
}

extern "C" void nchw_to_nhwc(const float* src, float* dst, int n, int c, int h, int w, cudaStream_t stream)
{
    int total = n * c * h * w;
    nchw_to_nhwc_kernel<<<(total + 255) / 256, 256, 0, stream>>>(src, dst, n, c, h, w);
}
