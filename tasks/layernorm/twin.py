"""PyTorch twin of tasks/layernorm (see scripts/vs-torch.py): row-wise LayerNorm with affine
gamma and beta, float32."""

import torch.nn.functional as F


def twin(x, gamma, beta, rows, cols, eps):
    return {"y": F.layer_norm(x.view(rows, cols), (cols,), gamma, beta, eps)}
