#include <cuda_runtime.h>

__global__ void levels_reference(const unsigned char* in, unsigned char* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    int v = ((int)in[i] - 16) * 255;
    v = v < 0 ? -((-v) / 219) : v / 219;
    out[i] = (unsigned char)(v < 0 ? 0 : (v > 255 ? 255 : v));
  }
}

extern "C" void levels_u8(const unsigned char* in, unsigned char* out, int n, cudaStream_t stream) {
  if (n <= 0) return;
  levels_reference<<<1024, 256, 0, stream>>>(in, out, n);
}
