"""PyTorch twin of segment_sum: offsets by cumsum, then the rows added into their
segment's sum (index_add, fp32 accumulation), as torch_scatter / PyG users write it."""
import torch


def twin(values, lengths, segments, dim):
    offsets = torch.cat([lengths.new_zeros(1), torch.cumsum(lengths, 0, dtype=torch.int32)])
    nnz = int(offsets[-1])  # a host sync: the row count decides the shapes below
    rows = values[: nnz * dim].view(nnz, dim).float()
    segment_of_row = torch.repeat_interleave(
        torch.arange(segments, device=values.device), lengths.long(), output_size=nnz
    )
    out = torch.zeros(segments, dim, dtype=torch.float32, device=values.device).index_add(0, segment_of_row, rows)
    return {"out": out.to(values.dtype), "offsets": offsets}
