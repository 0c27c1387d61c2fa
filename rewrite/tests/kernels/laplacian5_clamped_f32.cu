// entry: laplacian5
// arg: u in float width*height
// arg: lap out float width*height
// arg: width int 4096
// arg: height int 4096
// tolerance: 0 0
// expect: applies row-strip: `laplacian5_kernel`: 8 rows per thread (grid y extent / 8); rows read at several offsets shared in registers across the strip: `u` at rows y-1..y+1
// expect: applies read-only
// expect: declines grid-stride
// expect: declines unroll
#include <cuda_runtime.h>

// The 5-point Laplacian with clamped (replicated) borders: one thread per pixel on 32 x 8
// blocks, early return past the image, neighbours through clamped indices.
__global__ void laplacian5_kernel(const float* u, float* lap, int width, int height)
{
    int x = threadIdx.x + blockIdx.x * blockDim.x;
    int y = threadIdx.y + blockIdx.y * blockDim.y;
    if (x >= width || y >= height) return;
    int up = max(y - 1, 0);
    int down = min(y + 1, height - 1);
    int left = max(x - 1, 0);
    int right = min(x + 1, width - 1);
    float c = u[y * width + x];
    lap[y * width + x] = u[up * width + x] + u[down * width + x] + u[y * width + left] + u[y * width + right] - 4.0f * c;
}

extern "C" void laplacian5(const float* u, float* lap, int width, int height, cudaStream_t stream)
{
    laplacian5_kernel<<<dim3((width + 31) / 32, (height + 7) / 8), dim3(32, 8), 0, stream>>>(u, lap, width, height);
}
