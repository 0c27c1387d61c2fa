"""PyTorch twin of rowwise_quant_int8: per-row absmax, scale = absmax / 127,
q = clamp(round(x / scale), -127, 127) with round half to even (torch.round), 0 for a
row of zeros."""
import torch


def twin(x, rows, cols):
    xf = x.view(rows, cols).float()
    amax = xf.abs().amax(dim=1, keepdim=True)
    scale = amax / 127.0
    q = torch.where(amax > 0, torch.round(xf / scale), torch.zeros_like(xf))
    q = q.clamp(-127, 127).to(torch.int8)
    return {"q": q, "scale": scale.view(rows)}
