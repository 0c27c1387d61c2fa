// entry: box_vertical
// arg: src in float rows*cols
// arg: dst out float rows*cols
// arg: rows int 4096
// arg: cols int 4096
// tolerance: 0 0
// expect: applies row-strip: `box_vertical_kernel`: 8 rows per thread (grid y extent / 8); rows read at several offsets shared in registers across the strip: `src` at rows row-3..row+3
// expect: applies block-knob
// expect: declines fast-divmod
// expect: declines intrinsics
#include <cuda_runtime.h>

#define RADIUS 3
constexpr int kRowsPerBlock = 8;

// A vertical box filter (a sliding window of 2 * RADIUS + 1 rows, edges replicated): one
// thread per output, 32 x 8 blocks, the row stepped by a file-scope constant.
__global__ void box_vertical_kernel(const float* src, float* dst, int rows, int cols)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * kRowsPerBlock + threadIdx.y;
    if (col >= cols) return;
    if (row >= rows) return;
    float sum = 0.0f;
#pragma unroll
    for (int k = -RADIUS; k <= RADIUS; k++) {
        int r = min(max(row + k, 0), rows - 1);
        sum += src[(size_t)r * cols + col];
    }
    dst[(size_t)row * cols + col] = sum * (1.0f / (2 * RADIUS + 1));
}

extern "C" void box_vertical(const float* src, float* dst, int rows, int cols, cudaStream_t stream)
{
    const dim3 block(32, kRowsPerBlock);
    const dim3 grid((cols + 31) / 32, (rows + kRowsPerBlock - 1) / kRowsPerBlock);
    box_vertical_kernel<<<grid, block, 0, stream>>>(src, dst, rows, cols);
}
