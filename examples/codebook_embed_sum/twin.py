"""PyTorch twin of examples/codebook_embed_sum (see scripts/vs-torch.py): the summed
embeddings of K residual-quantizer codebooks, out[b, s] = sum_k tables[k, codes[b, k, s]].
One embedding lookup into the K tables laid end to end (codebook k's codes offset by
k * V), then a sum over the codebooks: a bf16 sum accumulates in float32 and rounds
once (summing K separate lookups pairwise in bf16 would round after every add)."""

import torch
import torch.nn.functional as F


def twin(codes, tables, B, K, S, V, D):
    offsets = torch.arange(K, device=codes.device).view(1, K, 1) * V
    emb = F.embedding(codes.view(B, K, S) + offsets, tables.view(K * V, D))  # B x K x S x D
    return {"out": emb.sum(dim=1)}  # B x S x D, bf16
