// entry: upsample_nearest2x
// arg: in in float nc*H*W
// arg: out out float nc*4*H*W
// arg: nc int 512
// arg: H int 64
// arg: W int 64
// tolerance: 0 0
// expect: applies fast-divmod
// expect: applies index-width
// expect: applies grid-stride
// expect: applies launch-bounds
// expect: applies block-knob: `upsample_nearest2x_kernel`: block size macro `NT` made a knob (`#ifndef` guard)
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
// expect: declines intrinsics
#include <cuda_runtime.h>
#include <stdint.h>

#define NT 256

// Nearest-neighbour 2x upsampling of a [nc, H, W] tensor to [nc, 2H, 2W].
__global__ void upsample_nearest2x_kernel(const float* in, float* out, int nc, int H, int W)
{
    const int64_t Ho = 2 * (int64_t)H;
    const int64_t Wo = 2 * (int64_t)W;
    const int64_t total = (int64_t)nc * Ho * Wo;
    int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= total) return;

    int64_t ox = o % Wo;
    int64_t oy = (o / Wo) % Ho;
    int64_t plane = o / (Ho * Wo);
    out[o] = in[(plane * H + oy / 2) * W + ox / 2];
}

extern "C" void upsample_nearest2x(const float* in, float* out, int nc, int H, int W, cudaStream_t stream)
{
    int64_t total = (int64_t)nc * 4 * H * W;
    unsigned int blocks = (unsigned int)((total + NT - 1) / NT);
    upsample_nearest2x_kernel<<<blocks, NT, 0, stream>>>(in, out, nc, H, W);
}
