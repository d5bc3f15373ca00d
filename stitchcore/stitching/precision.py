"""Mixed precision for a stitch (the memory layout is :func:`stitchcore.device.use_channels_last`'s).

``bf16``: the frozen models and the adapter run under ``torch.autocast`` (bfloat16 matrix products and
convolutions), while weights, optimiser state, the loss and every cached or returned activation stay float32.

>>> net = torch.nn.Linear(4, 2)
>>> Autocast(net, torch.device("cpu"))(torch.ones(3, 4)).dtype
torch.float32
>>> with autocast(torch.device("cpu"), True):
...     net(torch.ones(3, 4)).dtype
torch.bfloat16
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

__all__ = ["PRECISIONS", "Autocast", "autocast"]

PRECISIONS = ("fp32", "bf16")  # what a spec's ``precision`` takes

def autocast(device: torch.device, bf16: bool) -> contextlib.AbstractContextManager:
    """bf16 autocast on ``device`` when ``bf16``, else nothing."""
    return torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()


class Autocast(nn.Module):
    """``module`` run under bf16 autocast; its output comes back float32 ([B, ...] as the module's)."""

    def __init__(self, module: nn.Module, device: torch.device) -> None:
        super().__init__()
        self.module, self.device = module, device

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with autocast(self.device, True):
            return self.module(x).float()
