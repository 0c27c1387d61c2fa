// entry: transpose16_f32
// arg: in in float rows*cols
// arg: out out float rows*cols
// arg: rows int 4096
// arg: cols int 4096
// tolerance: 0 0
// expect: applies launch-bounds: `transpose16_kernel`: __launch_bounds__((16 * 16), NS_MIN_BLOCKS = 2)
// expect: declines block-knob: `transpose16_kernel` has no grid cap in its launcher, and its block is 16 x 16 while `transpose16_kernel` uses `TILE` = 16 as well: a knob per dimension could move the block off what `TILE` sizes
// expect: declines index-width: `transpose16_kernel` does its index arithmetic in 32 bits already
// expect: declines row-strip: `transpose16_kernel` shares data between threads (shared memory, barriers or warp primitives), which a strip of rows per thread would regroup
#include <cuda_runtime.h>

#define TILE 16

// A square-tile transpose: the block is written 16 x 16 in the launcher while the kernel
// sizes its tile by TILE, so the two must move together or not at all.
__global__ void transpose16_kernel(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    if (x < cols && y < rows)
        tile[threadIdx.y][threadIdx.x] = in[y * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    if (x < rows && y < cols)
        out[y * rows + x] = tile[threadIdx.x][threadIdx.y];
}

extern "C" void transpose16_f32(const float* in, float* out, int rows, int cols, cudaStream_t stream)
{
    dim3 block(16, 16);
    dim3 grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE);
    transpose16_kernel<<<grid, block, 0, stream>>>(in, out, rows, cols);
}
