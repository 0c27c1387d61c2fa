// entry: adam_step
// arg: param inout float n
// arg: grad in float n
// arg: exp_avg inout float n
// arg: exp_avg_sq inout float n
// arg: lr float
// arg: weight_decay float
// arg: n int 1048576
// tolerance: 1e-5 1e-6
// expect: applies vectorize
// expect: applies grid-stride
// expect: applies read-only
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
// expect: declines fast-divmod
// expect: declines index-width
#include <cuda_runtime.h>

#define BETA1 0.9f
#define BETA2 0.999f
#define ADAM_EPS 1e-8f

// One fused AdamW step (bias correction folded into lr by the caller).
__global__ void adam_step_kernel(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                                 float lr, float weight_decay, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float g = grad[i];
        float p = param[i];
        float m = BETA1 * exp_avg[i] + (1.0f - BETA1) * g;
        float v = BETA2 * exp_avg_sq[i] + (1.0f - BETA2) * g * g;
        v = fmaxf(v, 0.0f);
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
        p -= lr * weight_decay * p;
        param[i] = p - lr * m / (sqrtf(v) + ADAM_EPS);
    }
}

extern "C" void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                          float lr, float weight_decay, int n, cudaStream_t stream)
{
    adam_step_kernel<<<(n + 255) / 256, 256, 0, stream>>>(param, grad, exp_avg, exp_avg_sq, lr, weight_decay, n);
}
