"""torch2cuda/softmax_scale_mask: the problem, as a PyTorch module. forward takes the task's input
tensors in task.yaml's order and returns its outputs in that order (docs/tasks.md,
"PyTorch tasks")."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 0.125  # 1 / sqrt(64), an attention score scale

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x * self.scale + mask, dim=-1)
