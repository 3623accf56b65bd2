"""torch2triton/rmsnorm_mul: the problem, as a PyTorch module. forward takes the task's input
tensors in task.yaml's order and returns its outputs in that order (docs/tasks.md,
"PyTorch tasks")."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.eps = 1e-6

    def forward(self, x: torch.Tensor, weight: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * weight * gate
