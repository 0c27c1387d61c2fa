"""PyTorch twin of adamw_step: torch.optim.AdamW's single-tensor update, written out
functionally (new tensors returned, inputs left alone)."""
import math

import torch


def twin(param, grad, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay, step):
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    step_size = lr / bias_correction1

    exp_avg = exp_avg.lerp(grad, 1 - beta1)
    exp_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * grad * grad
    denom = exp_avg_sq.sqrt() / math.sqrt(bias_correction2) + eps
    param = (param * (1 - lr * weight_decay)).addcdiv(exp_avg, denom, value=-step_size)
    return {"param": param, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
