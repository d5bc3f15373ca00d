"""Multi-layer perceptron on flattened images: ``flatten, fc1 .. fc{depth}, head``.

>>> import torch
>>> m = MLP(MLPConfig())
>>> [n for n, _ in m.named_children()]
['flatten', 'fc1', 'fc2', 'fc3', 'head']
>>> m(torch.zeros(2, 1, 8, 8)).shape
torch.Size([2, 10])
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch
from torch import nn

from stitchcore.errors import RefError

__all__ = ["MLPConfig", "MLP"]


@dataclass(frozen=True)
class MLPConfig:
    """Options of the ``mlp`` architecture."""

    in_shape: tuple[int, ...] = (1, 8, 8)  # (C, H, W) of one image; sklearn digits are 1x8x8
    width: int = 64  # hidden units per layer; 64 fits digits well and stays tiny
    depth: int = 3  # hidden layers fc1..fc{depth}; several give cut points to sweep over
    num_classes: int = 10  # outputs of the head

    def __post_init__(self) -> None:
        if len(self.in_shape) != 3 or min(self.in_shape) < 1:
            raise RefError(
                f"mlp in_shape must be three positive ints (C,H,W), got {self.in_shape}; e.g. in_shape=1,8,8"
            )
        if self.width < 1 or self.depth < 1 or self.num_classes < 1:
            raise RefError(
                "mlp width, depth and num_classes must be >= 1; e.g. width=64&depth=3&num_classes=10"
            )


class MLP(nn.Sequential):
    """``flatten -> fc_i = (Linear, ReLU) ... -> head``: [B, C, H, W] -> logits [B, num_classes]."""

    config_cls = MLPConfig
    input_kind = "image"

    def __init__(self, config: MLPConfig) -> None:
        c, h, w = config.in_shape
        layers: OrderedDict[str, nn.Module] = OrderedDict(flatten=nn.Flatten())
        fan_in = c * h * w
        for i in range(1, config.depth + 1):
            layers[f"fc{i}"] = nn.Sequential(
                OrderedDict(linear=nn.Linear(fan_in, config.width), relu=nn.ReLU())
            )  # [B, width]
            fan_in = config.width
        layers["head"] = nn.Linear(fan_in, config.num_classes)  # [B, num_classes]
        super().__init__(layers)
        self.config = config

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One example without the batch dimension: (C, H, W)."""
        return tuple(self.config.in_shape)

    @property
    def num_outputs(self) -> int:
        """Number of classes."""
        return self.config.num_classes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, C, H, W] -> [B, num_classes]."""
        return super().forward(x)
