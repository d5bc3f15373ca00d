"""ResNet(x, x, x, x) of basic blocks for small images (8x8 .. 32x32).

A 3x3 stride-1 ``stem`` (no max-pool), stages ``layer1 .. layer4`` of
:class:`BasicBlock` (widths w, 2w, 4w, 8w; stride 2 from layer2 on), a global
average ``pool`` to a vector and a linear ``fc``.  ``blocks=(2, 2, 2, 2)`` with
``width=64`` is the CIFAR ResNet-18.  Names follow torchvision (``layer2.1``).

>>> import torch
>>> m = ResNet(ResNetConfig())
>>> [n for n, _ in m.named_children()]
['stem', 'layer1', 'layer2', 'layer3', 'layer4', 'pool', 'fc']
>>> m(torch.zeros(2, 1, 8, 8)).shape
torch.Size([2, 10])
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch
from torch import nn

from stitchcore.errors import RefError
from stitchcore.models.archs._image import SquareImageClassifier

__all__ = ["ResNetConfig", "ResNet", "BasicBlock", "GlobalAvgPool"]


@dataclass(frozen=True)
class ResNetConfig:
    """Options of the ``resnet`` architecture."""

    blocks: tuple[int, ...] = (1, 1, 1, 1)  # basic blocks per stage; (2,2,2,2) is ResNet-18
    width: int = 16  # channels of layer1; later stages double it (16 keeps CPU training fast)
    in_chans: int = 1  # image channels; 1 for digits/MNIST, 3 for CIFAR
    image_size: int = 8  # square input side (any size works; recorded for preprocessing)
    num_classes: int = 10  # outputs of fc

    def __post_init__(self) -> None:
        if not 1 <= len(self.blocks) <= 4 or not all(1 <= b <= 8 for b in self.blocks):
            raise RefError(
                f"resnet blocks must be 1..4 stages of 1..8 blocks, got {self.blocks}; e.g. blocks=2,2,2,2"
            )
        if self.width < 1 or self.in_chans < 1 or self.num_classes < 1 or self.image_size < 1:
            raise RefError("resnet width, in_chans, image_size and num_classes must be >= 1; e.g. width=16")


class BasicBlock(nn.Module):
    """Two 3x3 convs with BatchNorm and a residual; [B, Cin, H, W] -> [B, Cout, H/stride, W/stride]."""

    def __init__(self, in_chans: int, out_chans: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_chans, out_chans, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_chans)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(out_chans, out_chans, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_chans)
        self.downsample = (
            nn.Sequential(
                nn.Conv2d(in_chans, out_chans, 1, stride=stride, bias=False), nn.BatchNorm2d(out_chans)
            )
            if stride != 1 or in_chans != out_chans
            else nn.Identity()
        )
        self.relu2 = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, Cin, H, W] -> [B, Cout, H', W']."""
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu2(out + self.downsample(x))


class GlobalAvgPool(nn.Module):
    """Mean over space: [B, C, H, W] -> [B, C]."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, C, H, W] -> [B, C]."""
        return x.mean(dim=(2, 3))


class ResNet(SquareImageClassifier, nn.Module):
    """Input [B, in_chans, H, W] -> logits [B, num_classes]."""

    config_cls = ResNetConfig

    def __init__(self, config: ResNetConfig) -> None:
        super().__init__()
        self.config = config
        w = config.width
        self.stem = nn.Sequential(
            OrderedDict(
                conv=nn.Conv2d(config.in_chans, w, 3, padding=1, bias=False),
                bn=nn.BatchNorm2d(w),
                relu=nn.ReLU(),
            )
        )  # [B, w, H, W]
        chans = w
        self.stage_names: list[str] = []
        for i, n in enumerate(config.blocks):
            out, stride = w * 2**i, 1 if i == 0 else 2
            stage = nn.Sequential(
                *[BasicBlock(chans if j == 0 else out, out, stride if j == 0 else 1) for j in range(n)]
            )
            self.add_module(f"layer{i + 1}", stage)  # [B, w*2^i, H/2^i, W/2^i]
            self.stage_names.append(f"layer{i + 1}")
            chans = out
        self.pool = GlobalAvgPool()  # [B, chans]
        self.fc = nn.Linear(chans, config.num_classes)  # [B, num_classes]
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, in_chans, H, W] -> [B, num_classes]."""
        x = self.stem(x)
        for name in self.stage_names:
            x = getattr(self, name)(x)
        return self.fc(self.pool(x))
