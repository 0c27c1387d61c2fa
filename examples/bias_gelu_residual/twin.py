"""PyTorch twin of examples/bias_gelu_residual (see scripts/vs-torch.py): the MLP epilogue
out = gelu(x + bias) + residual in bf16 (exact, erf GELU), written as a bf16 model does.

This example has no task.toml in git: `nightshift init` makes the task (README, "Optimize
your own kernel"), with the launcher's names x, bias, residual, out, rows, cols. A task
folder named bias_gelu_residual (as `scripts/optimize-gpu.sh suite` makes
runs/tasks/bias_gelu_residual) finds this twin by its name; for another name, pass it:
    scripts/vs-torch.py tasks/my_epilogue --twin examples/bias_gelu_residual/twin.py
"""

import torch.nn.functional as F


def twin(x, bias, residual, rows, cols):
    return {"out": F.gelu(x.view(rows, cols) + bias) + residual.view(rows, cols)}
