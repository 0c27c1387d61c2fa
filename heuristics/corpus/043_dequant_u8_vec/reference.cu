#include <cuda_runtime.h>

__global__ void dequant_reference(const unsigned char* q, const float* scale, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = (float)((int)q[i] - 128) * scale[i / 128];
}

extern "C" void dequant_u8(const unsigned char* q, const float* scale, float* y, int groups, cudaStream_t stream) {
  if (groups <= 0) return;
  dequant_reference<<<1024, 256, 0, stream>>>(q, scale, y, groups * 128);
}
