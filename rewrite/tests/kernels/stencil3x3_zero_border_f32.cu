// entry: stencil3x3
// arg: in in float width*height
// arg: w in float 9
// arg: out out float width*height
// arg: width int 4096
// arg: height int 4096
// tolerance: 0 0
// expect: applies row-strip: `stencil3x3_kernel`: 8 rows per thread (grid y extent / 8); rows read at several offsets shared in registers across the strip: `in` at rows y-1..y+1 (3 windows)
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines cooperative
// expect: declines index-width
#include <cuda_runtime.h>

// A weighted 3x3 stencil with zero borders: one thread per output pixel on a 16 x 16
// block, the taps in two loops, each tap behind its own bounds check.
__global__ void stencil3x3_kernel(const float* __restrict__ in, const float* __restrict__ w, float* __restrict__ out,
                                  int width, int height)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < width && y < height) {
        float acc = 0.0f;
        for (int dy = -1; dy <= 1; ++dy) {
            for (int dx = -1; dx <= 1; ++dx) {
                const int yy = y + dy, xx = x + dx;
                if (yy >= 0 && yy < height && xx >= 0 && xx < width)
                    acc = fmaf(w[(dy + 1) * 3 + (dx + 1)], in[yy * width + xx], acc);
            }
        }
        out[y * width + x] = acc;
    }
}

extern "C" void stencil3x3(const float* in, const float* w, float* out, int width, int height, cudaStream_t stream)
{
    dim3 block(16, 16);
    dim3 grid((width + 15) / 16, (height + 15) / 16);
    stencil3x3_kernel<<<grid, block, 0, stream>>>(in, w, out, width, height);
}
