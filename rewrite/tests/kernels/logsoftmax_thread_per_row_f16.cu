// entry: log_softmax_f16
// arg: in in half n_rows*n_cols
// arg: out out half n_rows*n_cols
// arg: n_rows int 2048
// arg: n_cols int 512
// tolerance: 2e-2 2e-2
// expect: applies cooperative
// expect: applies intrinsics
// expect: applies unroll
// expect: applies launch-bounds
// expect: applies block-knob: `log_softmax_f16_kernel`: block size macro `ROWS_PER_BLOCK` made a knob (`#ifndef` guard)
// expect: declines vectorize
// expect: declines shuffle-reduce
// expect: declines fast-divmod
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#define ROWS_PER_BLOCK 64

// log_softmax over the last dim of a [n_rows, n_cols] half tensor,
// fp32 accumulation, one thread per row.
__global__ void log_softmax_f16_kernel(const half* in, half* out, int n_rows, int n_cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rows) return;

    float mx = -65504.0f;
    for (int c = 0; c < n_cols; c++) {
        mx = fmaxf(mx, __half2float(in[r * n_cols + c]));
    }
    float sum = 0.0f;
    for (int c = 0; c < n_cols; c++) {
        sum += expf(__half2float(in[r * n_cols + c]) - mx);
    }
    const float lse = mx + logf(sum);
    for (int c = 0; c < n_cols; c++) {
        out[r * n_cols + c] = __float2half(__half2float(in[r * n_cols + c]) - lse);
    }
}

extern "C" void log_softmax_f16(const half* in, half* out, int n_rows, int n_cols, cudaStream_t stream)
{
    int blocks = (n_rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    log_softmax_f16_kernel<<<blocks, ROWS_PER_BLOCK, 0, stream>>>(in, out, n_rows, n_cols);
}
