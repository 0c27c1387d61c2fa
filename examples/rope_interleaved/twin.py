"""PyTorch twin of examples/rope_interleaved (see scripts/vs-torch.py): interleaved-pair
rotary embedding (GPT-J style) of fp16 q and k by the float32 cos/sin tables at each
token's position. Pairs (x[2i], x[2i+1]) become (x0 cos - x1 sin, x0 sin + x1 cos),
computed in float32 and rounded to fp16 once."""

import torch


def rotate(x, cos, sin):
    pairs = x.float().unflatten(-1, (-1, 2))  # tokens x heads x head_dim/2 x 2
    x0, x1 = pairs[..., 0], pairs[..., 1]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2).to(x.dtype)


def twin(q, k, positions, cos_cache, sin_cache, num_tokens, num_heads, num_kv_heads, head_dim):
    half = head_dim // 2
    cos = cos_cache.view(-1, half)[positions].unsqueeze(1)  # tokens x 1 x head_dim/2
    sin = sin_cache.view(-1, half)[positions].unsqueeze(1)
    q_out = rotate(q.view(num_tokens, num_heads, head_dim), cos, sin)
    k_out = rotate(k.view(num_tokens, num_kv_heads, head_dim), cos, sin)
    return {"q_out": q_out, "k_out": k_out}
