// Baseline: the classic tiled transpose. A 32x32 tile goes through shared memory padded
// to 33 columns (no bank conflicts); each block of 32 x TILE_ROWS threads moves a tile,
// so both global reads and global writes are coalesced.
#include <cuda_runtime.h>

#ifndef TILE_ROWS
#define TILE_ROWS 8
#endif
constexpr int kTile = 32;

__global__ void transpose_tiled(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[kTile][kTile + 1];
  int x = blockIdx.x * kTile + threadIdx.x;
  int y = blockIdx.y * kTile + threadIdx.y;
  for (int j = 0; j < kTile; j += TILE_ROWS)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * kTile + threadIdx.x;
  y = blockIdx.x * kTile + threadIdx.y;
  for (int j = 0; j < kTile; j += TILE_ROWS)
    if (x < rows && y + j < cols) out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

extern "C" void transpose(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  dim3 grid((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile);
  transpose_tiled<<<grid, dim3(kTile, TILE_ROWS), 0, stream>>>(in, out, rows, cols);
}
