// entry: nchw_bias_relu
// arg: input in float N*C*H*W
// arg: bias in float C
// arg: output out float N*C*H*W
// arg: N int 8
// arg: C int 128
// arg: H int 56
// arg: W int 56
// tolerance: 1e-6 1e-6
// expect: applies fast-divmod
// expect: applies vectorize
// expect: applies grid-stride
// expect: applies read-only
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
// expect: declines index-width
// expect: declines intrinsics
#include <cuda_runtime.h>

// Fused conv epilogue: per-channel bias + ReLU on an NCHW tensor.
__global__ void bias_relu_nchw_kernel(const float* input, const float* bias, float* output,
                                      int N, int C, int H, int W)
{
    int HW = H * W;
    int total = N * C * HW;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) {
        int c = (i / HW) % C;   // channel of this element
        float v = input[i] + bias[c];
        output[i] = v > 0.0f ? v : 0.0f;
    }
}

extern "C" void nchw_bias_relu(const float* input, const float* bias, float* output,
                               int N, int C, int H, int W, cudaStream_t stream)
{
    int total = N * C * H * W;
    bias_relu_nchw_kernel<<<(total + 255) / 256, 256, 0, stream>>>(input, bias, output, N, C, H, W);
}
