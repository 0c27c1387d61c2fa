"""PyTorch twin of tasks/moe_combine (see scripts/vs-torch.py): MoE unpermute and weighted
combine, y[t] = sum_j weights[t, j] * expert_out[row_idx[t, j]]. The gathered bf16 rows
times the float32 weights promote to float32; the sum over the top-k slots is rounded
to bf16 once."""

import torch


def twin(expert_out, row_idx, weights, T, topk, H):
    gathered = expert_out.view(T * topk, H)[row_idx.view(T, topk)]  # T x topk x H, bf16
    y = (gathered * weights.view(T, topk, 1)).sum(dim=1)  # float32
    return {"y": y.to(torch.bfloat16)}
