"""PyTorch twin of causal_conv1d: out = act(bias + causal depthwise conv1d(x, weight)),
fp32 arithmetic and one rounding to bf16, like the kernel.

The convolution is written as four shifted multiply-adds on a left-padded view rather
than F.conv1d(..., groups=dim): a width-4 depthwise convolution is a pointwise stencil,
which torch.compile fuses (with the casts, the bias and SiLU) into one kernel, while a
conv1d stays a separate cuDNN call (and an fp32 cuDNN convolution may use TF32).
"""
import torch
import torch.nn.functional as F


def twin(x, weight, bias, batch, dim, seqlen, silu):
    width = weight.numel() // dim
    xp = F.pad(x.view(batch, dim, seqlen).float(), (width - 1, 0))  # zeros before t = 0
    w = weight.view(dim, width).float()
    out = bias.float().view(1, dim, 1).expand(batch, dim, seqlen)
    for k in range(width):
        out = out + w[:, k].view(1, dim, 1) * xp[:, :, k:k + seqlen]
    if silu:
        out = F.silu(out)
    return {"out": out.to(torch.bfloat16)}
