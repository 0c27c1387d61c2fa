#include <cuda_runtime.h>

#define TILE 32

__global__ void transpose_tile(const float* __restrict__ input, float* __restrict__ output, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];
  int c = blockIdx.x * TILE + threadIdx.x, r0 = blockIdx.y * TILE;
  for (int k = threadIdx.y; k < TILE; k += blockDim.y)
    if (r0 + k < rows && c < cols) tile[k][threadIdx.x] = input[(size_t)(r0 + k) * cols + c];
  __syncthreads();
  int oc = r0 + threadIdx.x, c0 = blockIdx.x * TILE;
  for (int k = threadIdx.y; k < TILE; k += blockDim.y)
    if (c0 + k < cols && oc < rows) output[(size_t)(c0 + k) * rows + oc] = tile[threadIdx.x][k];
}

extern "C" void transpose_tiled(const float* input, float* output, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  dim3 grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE);
  transpose_tile<<<grid, dim3(TILE, 8), 0, stream>>>(input, output, rows, cols);
}
