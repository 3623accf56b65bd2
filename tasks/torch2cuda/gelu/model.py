"""torch2cuda/gelu: the problem, as a PyTorch module. forward takes the task's input
tensors in task.yaml's order and returns its outputs in that order (docs/tasks.md,
"PyTorch tasks")."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)  # the exact (erf) form, PyTorch's default
