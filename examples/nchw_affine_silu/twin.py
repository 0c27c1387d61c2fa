"""PyTorch twin of examples/nchw_affine_silu (see scripts/vs-torch.py): a folded BatchNorm
(per-channel float32 scale and bias) then SiLU on an fp16 NCHW activation. The fp16 input
times the float32 scale promotes to float32; the result is rounded to fp16 once."""

import torch
import torch.nn.functional as F


def twin(x, scale, bias, N, C, H, W):
    v = x.view(N, C, H, W) * scale.view(1, C, 1, 1) + bias.view(1, C, 1, 1)  # float32
    return {"y": F.silu(v).to(torch.float16)}
