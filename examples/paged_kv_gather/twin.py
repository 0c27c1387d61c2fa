"""PyTorch twin of paged_kv_gather: index the block pool with the table, keep the first
seqlen tokens of each sequence."""
import torch


def twin(k_cache, v_cache, block_table, batch, seqlen, max_blocks, block_size, heads, head_dim):
    table = block_table.view(batch, max_blocks).long()
    blocks_used = (seqlen + block_size - 1) // block_size
    idx = table[:, :blocks_used]

    def gather(cache):
        pool = cache.view(-1, block_size, heads, head_dim)
        # batch x blocks_used x block_size x heads x head_dim -> batch x tokens x heads x head_dim
        return pool[idx].reshape(batch, blocks_used * block_size, heads, head_dim)[:, :seqlen].contiguous()

    return {"k_out": gather(k_cache), "v_out": gather(v_cache)}
