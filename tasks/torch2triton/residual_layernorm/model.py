"""torch2triton/residual_layernorm: the problem, as a PyTorch module. forward takes the task's input
tensors in task.yaml's order and returns its outputs in that order (docs/tasks.md,
"PyTorch tasks")."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor) -> torch.Tensor:
        h = x + residual
        return F.layer_norm(h, (h.shape[-1],), weight, bias, eps=1e-5)
