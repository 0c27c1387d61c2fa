// One AdamW step (Loshchilov & Hutter; PyTorch's torch.optim.AdamW) over a flat fp32
// parameter shard, everything updated in place:
//   param      = param * (1 - lr * weight_decay)
//   exp_avg    = beta1 * exp_avg + (1 - beta1) * grad
//   exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad^2
//   param      = param - lr * m_hat / (sqrt(v_hat) + eps)
// with m_hat = exp_avg / (1 - beta1^step) and v_hat = exp_avg_sq / (1 - beta2^step).
// One thread per parameter.
#include <cuda_runtime.h>

__global__ void adamw_step_kernel(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int n, float lr,
                                  float beta1, float beta2, float eps, float weight_decay, int step) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;

  float bias_correction1 = 1.0f - powf(beta1, (float)step);
  float bias_correction2 = 1.0f - powf(beta2, (float)step);

  float g = grad[i];
  float p = param[i];
  p = p * (1.0f - lr * weight_decay);  // decoupled weight decay

  float m = beta1 * exp_avg[i] + (1.0f - beta1) * g;
  float v = beta2 * exp_avg_sq[i] + (1.0f - beta2) * g * g;
  exp_avg[i] = m;
  exp_avg_sq[i] = v;

  float m_hat = m / bias_correction1;
  float v_hat = v / bias_correction2;
  param[i] = p - lr * m_hat / (sqrtf(v_hat) + eps);
}

extern "C" void adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int n, float lr,
                           float beta1, float beta2, float eps, float weight_decay, int step, cudaStream_t stream) {
  if (n <= 0) return;
  const int threads = 256;
  const int blocks = (n + threads - 1) / threads;
  adamw_step_kernel<<<blocks, threads, 0, stream>>>(param, grad, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps,
                                                    weight_decay, step);
}
