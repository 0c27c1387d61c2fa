"""PyTorch twin of tasks/rmsnorm (see scripts/vs-torch.py): row-wise RMSNorm of bf16 x with a
bf16 weight, computed in float32 and rounded to bf16 once, as the reference does (the
usual `x.float()` ... `.to(dtype)` pattern of LLaMA-style RMSNorm modules)."""

import torch


def twin(x, weight, rows, cols, eps):
    xf = x.view(rows, cols).float()
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    return {"y": y.to(torch.bfloat16)}
