// Trusted reference: a 3-D grid, blockIdx.z = n, blockIdx.y = c, threads over the H*W
// plane, so the channel comes straight from the grid. Affine and SiLU in double, rounded
// to fp16 once at the end.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void channel_affine_silu_reference(const __half* x, const float* scale, const float* bias, __half* y,
                                              int C, long long HW) {
  const int n = blockIdx.z, c = blockIdx.y;
  const long long plane = ((long long)n * C + c) * HW;
  const double s = scale[c], b = bias[c];
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < HW; i += (long long)gridDim.x * blockDim.x) {
    const double v = (double)__half2float(x[plane + i]) * s + b;
    y[plane + i] = __float2half_rn((float)(v / (1.0 + exp(-v))));
  }
}

extern "C" void channel_affine_silu_nchw(const __half* x, const float* scale, const float* bias, __half* y, int N,
                                         int C, int H, int W, cudaStream_t stream) {
  const long long HW = (long long)H * W;
  if (N <= 0 || C <= 0 || HW <= 0) return;
  long long bx = (HW + 255) / 256;
  if (bx > 64) bx = 64;
  dim3 grid((unsigned)bx, (unsigned)C, (unsigned)N);
  channel_affine_silu_reference<<<grid, 256, 0, stream>>>(x, scale, bias, y, C, HW);
}
