// entry: transpose_f32
// arg: in in float rows*cols
// arg: out out float rows*cols
// arg: rows int 4096
// arg: cols int 4096
// tolerance: 0 0
// expect: declines prefetch: `transpose_tiled`: the loop at line 33: no `__syncthreads();` of its own; the loop at line 41: no `__syncthreads();` of its own
// expect: declines tensor-tile
// expect: applies unroll
// expect: applies read-only
// expect: declines vectorize
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines grid-stride
// expect: applies launch-bounds: `transpose_tiled`: __launch_bounds__((TILE_DIM * BLOCK_ROWS), NS_MIN_BLOCKS = 2)
// expect: applies block-knob: `transpose_tiled`: block x size macro `TILE_DIM` made a knob (`#ifndef` guard), block y size macro `BLOCK_ROWS` made a knob (`#ifndef` guard)
// expect: declines fast-divmod
// expect: declines index-width
// expect: declines intrinsics
#include <cuda_runtime.h>

#define TILE_DIM 32
#define BLOCK_ROWS 8

// Out-of-place transpose through a padded shared-memory tile
// (32x32 tile, 32x8 threads, each thread moves 4 elements).
__global__ void transpose_tiled(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];

    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int k = 0; k < TILE_DIM; k += BLOCK_ROWS) {
        if (x < cols && y + k < rows)
            tile[threadIdx.y + k][threadIdx.x] = in[(y + k) * cols + x];
    }
    __syncthreads();

    x = blockIdx.y * TILE_DIM + threadIdx.x;
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int k = 0; k < TILE_DIM; k += BLOCK_ROWS) {
        if (x < rows && y + k < cols)
            out[(y + k) * rows + x] = tile[threadIdx.x][threadIdx.y + k];
    }
}

extern "C" void transpose_f32(const float* in, float* out, int rows, int cols, cudaStream_t stream)
{
    dim3 block(TILE_DIM, BLOCK_ROWS);
    dim3 grid((cols + TILE_DIM - 1) / TILE_DIM, (rows + TILE_DIM - 1) / TILE_DIM);
    transpose_tiled<<<grid, block, 0, stream>>>(in, out, rows, cols);
}
