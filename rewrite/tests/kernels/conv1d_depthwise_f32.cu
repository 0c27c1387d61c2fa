// entry: depthwise_conv1d
// arg: x in float N*C*L
// arg: w in float C*K
// arg: y out float N*C*L
// arg: N int 8
// arg: C int 256
// arg: L int 1024
// arg: K int 7
// tolerance: 1e-5 1e-6
// expect: applies fast-divmod
// expect: applies unroll
// expect: applies read-only
// expect: declines register-table
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines shuffle-reduce
// expect: declines intrinsics
// expect: declines index-width
// expect: applies vectorize: `dwconv1d_kernel`: 4 elements per thread, y 16B out through registers; `i` divided once per run of 4 by `L` (a multiple of 4) (2 site(s)); the loop over `k` runs once for the run, each step over its 4 elements
#include <cuda_runtime.h>

// Depthwise 1-D convolution ("same" padding), x/y are [N, C, L], w is [C, K].
// One thread per output element.
__global__ void dwconv1d_kernel(const float* x, const float* w, float* y, int N, int C, int L, int K)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * C * L) return;

    int l = i % L;
    int c = (i / L) % C;
    int row_start = i - l;
    int pad = K / 2;

    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        int pos = l + k - pad;
        if (pos >= 0 && pos < L)
            acc += x[row_start + pos] * w[c * K + k];
    }
    y[i] = acc;
}

extern "C" void depthwise_conv1d(const float* x, const float* w, float* y, int N, int C, int L, int K,
                                 cudaStream_t stream)
{
    int total = N * C * L;
    dwconv1d_kernel<<<(total + 255) / 256, 256, 0, stream>>>(x, w, y, N, C, L, K);
}
