// entry: causal_conv_taps
// arg: x in __half batch*dim*seqlen
// arg: w in float dim*3
// arg: out out __half batch*dim*seqlen
// arg: batch int 8
// arg: dim int 2048
// arg: seqlen int 1024
// tolerance: 1e-2 1e-2
// expect: applies vectorize: `causal_conv_taps_kernel`: 8 elements per thread, out 16B out through registers; `x` read through a register window: the run (16B) plus 2 before and 0 after (1 read site(s)); `idx` divided once per run of 8 by `seqlen` (a multiple of 8) (2 site(s))
// expect: declines cooperative
// A depthwise causal convolution with three taps over time-innermost rows, read through
// a pointer to the row's start; the taps past the row's start count as zero.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

constexpr int TAPS = 3;

__global__ void causal_conv_taps_kernel(const __half* x, const float* w, __half* out, int dim, int seqlen,
                                        size_t total) {
  size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const int t = (int)(idx % seqlen);
  const int d = (int)((idx / seqlen) % dim);
  const __half* row = x + (idx - t);
  float acc = 0.0f;
  for (int k = 0; k < TAPS; ++k) {
    const int at = t - (TAPS - 1) + k;
    if (at >= 0) acc += w[d * TAPS + k] * __half2float(row[at]);
  }
  out[idx] = __float2half(acc);
}

extern "C" void causal_conv_taps(const __half* x, const float* w, __half* out, int batch, int dim, int seqlen,
                                 cudaStream_t stream) {
  const size_t total = (size_t)batch * dim * seqlen;
  if (total == 0) return;
  causal_conv_taps_kernel<<<(unsigned)((total + 127) / 128), 128, 0, stream>>>(x, w, out, dim, seqlen, total);
}
