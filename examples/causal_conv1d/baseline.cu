// Depthwise causal 1-D convolution, the short convolution in front of the SSM of a
// Mamba block (and of Hyena/H3-style layers), fused with its bias and SiLU:
//   out[b, d, t] = act(bias[d] + sum_{k=0}^{3} weight[d, k] * x[b, d, t - 3 + k])
// with x[b, d, t] = 0 for t < 0 (causal: no output sees the future) and act = SiLU when
// silu != 0, the identity otherwise. x and out are batch x dim x seqlen bf16, contiguous
// (time innermost); weight is dim x 4, bias dim (bias may be null). fp32 accumulation.
// One thread per output element over a flat index.
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#define WIDTH 4

__global__ void causal_conv1d_fwd_kernel(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                         const __nv_bfloat16* bias, __nv_bfloat16* out, int dim,
                                         int seqlen, size_t total, int silu) {
  const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const int t = (int)(idx % seqlen);
  const int d = (int)((idx / seqlen) % dim);
  const __nv_bfloat16* xrow = x + (idx - t);  // start of this (b, d) row

  float acc = bias != nullptr ? __bfloat162float(bias[d]) : 0.0f;
  for (int k = 0; k < WIDTH; ++k) {
    const int tt = t - (WIDTH - 1) + k;
    if (tt >= 0) acc += __bfloat162float(weight[d * WIDTH + k]) * __bfloat162float(xrow[tt]);
  }
  if (silu) acc = acc / (1.0f + expf(-acc));
  out[idx] = __float2bfloat16(acc);
}

extern "C" void causal_conv1d_fwd(const __nv_bfloat16* x, const __nv_bfloat16* weight, const __nv_bfloat16* bias,
                                  __nv_bfloat16* out, int batch, int dim, int seqlen, int silu,
                                  cudaStream_t stream) {
  if (batch <= 0 || dim <= 0 || seqlen <= 0) return;
  const size_t total = (size_t)batch * dim * seqlen;
  const int threads = 256;
  const unsigned blocks = (unsigned)((total + threads - 1) / threads);
  causal_conv1d_fwd_kernel<<<blocks, threads, 0, stream>>>(x, weight, bias, out, dim, seqlen, total, silu);
}
