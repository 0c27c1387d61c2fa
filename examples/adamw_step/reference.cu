// Trusted reference: PyTorch's AdamW formulas (torch.optim.AdamW, single-tensor path)
// evaluated in double per element from the fp32 inputs and scalars, each result rounded
// to fp32 once:
//   param      = param * (1 - lr * weight_decay)
//   exp_avg    = beta1 * exp_avg + (1 - beta1) * grad
//   exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad^2
//   param      = param - lr / (1 - beta1^step) * exp_avg / (sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps)
#include <cuda_runtime.h>

__global__ void adamw_step_reference(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int n,
                                     double lr, double beta1, double beta2, double eps, double weight_decay,
                                     double step) {
  const double bias_correction1 = 1.0 - pow(beta1, step);
  const double bias_correction2 = 1.0 - pow(beta2, step);
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
    const double g = grad[i];
    const double m = beta1 * (double)exp_avg[i] + (1.0 - beta1) * g;
    const double v = beta2 * (double)exp_avg_sq[i] + (1.0 - beta2) * g * g;
    const double p = (double)param[i] * (1.0 - lr * weight_decay);
    const double denom = sqrt(v) / sqrt(bias_correction2) + eps;
    param[i] = (float)(p - (lr / bias_correction1) * m / denom);
    exp_avg[i] = (float)m;
    exp_avg_sq[i] = (float)v;
  }
}

extern "C" void adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int n, float lr,
                           float beta1, float beta2, float eps, float weight_decay, int step, cudaStream_t stream) {
  if (n <= 0) return;
  const int blocks = (n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096;
  adamw_step_reference<<<blocks, 256, 0, stream>>>(param, grad, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps,
                                                   weight_decay, (double)step);
}
