"""PyTorch twin of stencil2d_3x3: y = the 3x3 cross-correlation of each image with w,
zero padding (conv2d with padding=1).

Written as nine shifted multiply-adds on a zero-padded view rather than F.conv2d: on a
GPU, PyTorch runs an fp32 conv2d through cuDNN with TF32 allowed by default
(torch.backends.cudnn.allow_tf32), which rounds the inputs to 10 bits of mantissa and
would miss the task's 1e-5 tolerance. This form is exact fp32 arithmetic, and it is the
shape torch.compile fuses into one stencil kernel.
"""
import torch
import torch.nn.functional as F


def twin(x, w, N, H, W):
    xp = F.pad(x.view(N, H, W), (1, 1, 1, 1))  # zero border, N x (H + 2) x (W + 2)
    y = None
    for dy in range(3):
        for dx in range(3):
            term = w[3 * dy + dx] * xp[:, dy:dy + H, dx:dx + W]
            y = term if y is None else y + term
    return {"y": y}
