#include <cuda_runtime.h>

__global__ void levels_kernel(const unsigned char* in, unsigned char* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int v = (in[i] - 16) * 255 / 219;
    out[i] = (unsigned char)min(max(v, 0), 255);
  }
}

extern "C" void levels_u8(const unsigned char* in, unsigned char* out, int n, cudaStream_t stream) {
  if (n <= 0) return;
  levels_kernel<<<(n + 255) / 256, 256, 0, stream>>>(in, out, n);
}
