"""PyTorch twin of tasks/histogram (see scripts/vs-torch.py): the 256-bin histogram of a byte
stream. torch.bincount counts in int64 (torch has no uint32 counting); the counts are
compared as values."""

import torch


def twin(data, n):
    return {"bins": torch.bincount(data, minlength=256)}
