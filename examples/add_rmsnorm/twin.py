"""PyTorch twin of examples/add_rmsnorm (see scripts/vs-torch.py): the fused residual add +
RMSNorm of a bf16 transformer block. residual_out = x + residual, stored in bf16 (one
rounding of the exact sum); out = RMSNorm(residual_out) * weight, computed in float32
from the stored residual and rounded to bf16 once, as the reference does."""

import torch


def twin(x, residual, weight, rows, cols, eps):
    h = x.view(rows, cols) + residual.view(rows, cols)  # the new residual stream, bf16
    hf = h.float()
    out = hf * torch.rsqrt(hf.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    return {"out": out.to(torch.bfloat16), "residual_out": h}
