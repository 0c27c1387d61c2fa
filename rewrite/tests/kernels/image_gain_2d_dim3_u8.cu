// entry: image_gain_u8
// arg: src in uint8_t width*height
// arg: dst out uint8_t width*height
// arg: width int 4096
// arg: height int 4096
// arg: gain float
// tolerance: 0 0
// expect: applies launch-bounds: `image_gain_kernel`: __launch_bounds__((16 * 16), NS_MIN_BLOCKS = 2)
// expect: applies block-knob: `image_gain_kernel`: block x size 16 as `NS_BLOCK_X_IMAGE_GAIN_KERNEL`, block y size 16 as `NS_BLOCK_Y_IMAGE_GAIN_KERNEL`
// expect: applies index-width: `image_gain_kernel`: `at` and 1 cast in 32-bit `int`
// expect: applies row-strip: `image_gain_kernel`: 8 rows per thread (grid y extent / 8); no row reuse: no buffer it only reads is read at several row offsets
// expect: applies coarsen
#include <cuda_runtime.h>
#include <stdint.h>

// A gain on an 8-bit image: one thread per pixel, 16 x 16 blocks on a 2-D grid; the
// kernel reads the block's shape only through blockDim.
__global__ void image_gain_kernel(const uint8_t* src, uint8_t* dst, int width, int height, float gain)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col < width && row < height) {
        size_t at = (size_t)row * width + col;
        float v = gain * (float)src[at];
        dst[at] = (uint8_t)fminf(v, 255.0f);
    }
}

extern "C" void image_gain_u8(const uint8_t* src, uint8_t* dst, int width, int height, float gain,
                              cudaStream_t stream)
{
    dim3 block(16, 16);
    dim3 grid((width + 15) / 16, (height + 15) / 16);
    image_gain_kernel<<<grid, block, 0, stream>>>(src, dst, width, height, gain);
}
