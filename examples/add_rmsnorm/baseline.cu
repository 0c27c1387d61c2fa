// Fused residual add + RMSNorm for a bf16 transformer block (the pre-norm of the next
// sublayer):
//   h            = x + residual             (rounded to bf16: the new residual stream)
//   residual_out = h
//   out          = h * rsqrt(mean(h^2) + eps) * weight
// One block per row (token); each thread strides over the hidden dimension, the sum of
// squares is reduced through shared memory, then a second pass normalizes.
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__global__ void fused_add_rmsnorm_kernel(const __nv_bfloat16* x, const __nv_bfloat16* residual,
                                         const __nv_bfloat16* weight, __nv_bfloat16* out,
                                         __nv_bfloat16* residual_out, int cols, float eps) {
  extern __shared__ float sdata[];
  const size_t base = (size_t)blockIdx.x * cols;

  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    __nv_bfloat16 h = __float2bfloat16(__bfloat162float(x[base + i]) + __bfloat162float(residual[base + i]));
    residual_out[base + i] = h;
    float v = __bfloat162float(h);
    sum_sq += v * v;
  }
  sdata[threadIdx.x] = sum_sq;
  __syncthreads();

  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sdata[threadIdx.x] += sdata[threadIdx.x + s];
    __syncthreads();
  }
  const float inv_rms = rsqrtf(sdata[0] / (float)cols + eps);

  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    float v = __bfloat162float(residual_out[base + i]);
    out[base + i] = __float2bfloat16(v * inv_rms * __bfloat162float(weight[i]));
  }
}

extern "C" void fused_add_rmsnorm(const __nv_bfloat16* x, const __nv_bfloat16* residual, const __nv_bfloat16* weight,
                                  __nv_bfloat16* out, __nv_bfloat16* residual_out, int rows, int cols, float eps,
                                  cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const int threads = 512;  // power of two: the tree reduction halves blockDim.x
  fused_add_rmsnorm_kernel<<<rows, threads, threads * sizeof(float), stream>>>(x, residual, weight, out,
                                                                                residual_out, cols, eps);
}
