#include <cuda_runtime.h>

#define TILE 32

__global__ void transpose_tiled(const float* __restrict__ input, float* __restrict__ output, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];
  int c = blockIdx.x * TILE + threadIdx.x;
  int r0 = blockIdx.y * TILE;
  for (int k = threadIdx.y; k < TILE; k += blockDim.y) {
    int r = r0 + k;
    if (r < rows && c < cols) tile[k][threadIdx.x] = input[(size_t)r * cols + c];
  }
  __syncthreads();
  int oc = r0 + threadIdx.x;  // output column = input row
  int c0 = blockIdx.x * TILE;
  for (int k = threadIdx.y; k < TILE; k += blockDim.y) {
    int orow = c0 + k;        // output row = input column
    if (orow < cols && oc < rows) output[(size_t)orow * rows + oc] = tile[threadIdx.x][k];
  }
}

extern "C" void transpose(const float* input, float* output, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  dim3 block(TILE, 8);
  dim3 grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE);
  transpose_tiled<<<grid, block, 0, stream>>>(input, output, rows, cols);
}
