"""The small CNN of the trait experiments (Oxford report style).

Conv blocks ``block1, block2`` (3x3 conv, ReLU, 2x2 max-pool), then ``flatten``,
fully connected blocks ``fc1, fc2 ...`` (Linear, ReLU) and a linear ``head``:
3 to 5 linear layers in all, so a trait can be located along depth.

The defaults (two blocks) are sized for the 8x8 digits.  ``channels=16,32,64`` (:data:`DEEP_CHANNELS`) gives
three conv blocks, the zoo's recipe on the 28x28 ``mnist5k`` (28 -> 14 -> 7 -> 3: 0.97 after 10 epochs,
~25 s on one CPU thread; see ``stitchcore.experiments.zoo_recipe.DATASET_RECIPE_DEFAULTS``).

>>> import torch
>>> m = CNN(CNNConfig())
>>> [n for n, _ in m.named_children()]
['block1', 'block2', 'flatten', 'fc1', 'fc2', 'head']
>>> m(torch.zeros(2, 1, 8, 8)).shape
torch.Size([2, 10])
>>> deep = CNN(CNNConfig(image_size=28, channels=DEEP_CHANNELS))
>>> [n for n, _ in deep.named_children()][:4], deep.block3(torch.zeros(2, 32, 7, 7)).shape
(['block1', 'block2', 'block3', 'flatten'], torch.Size([2, 64, 3, 3]))
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch
from torch import nn

from stitchcore.errors import RefError
from stitchcore.models.archs._image import SquareImageClassifier

__all__ = ["CNN", "DEEP_CHANNELS", "CNNConfig"]

DEEP_CHANNELS = (16, 32, 64)  # three conv blocks: the 28x28 mnist5k's (two leave a 7x7x32 map to the fc layers)


@dataclass(frozen=True)
class CNNConfig:
    """Options of the ``cnn`` architecture."""

    in_chans: int = 1  # image channels; 1 for digits/MNIST, 3 for CIFAR
    image_size: int = 8  # square input side; 8 for sklearn digits, 28 MNIST, 32 CIFAR
    channels: tuple[int, ...] = (16, 32)  # output channels of block1, block2 ...; each block halves the side
    fc_widths: tuple[int, ...] = (
        64,
        32,
    )  # hidden fc widths; 2..4 of them give 3..5 linear layers with the head
    num_classes: int = 10  # outputs of the head

    def __post_init__(self) -> None:
        if not 1 <= len(self.channels) <= 4 or min(self.channels) < 1:
            raise RefError(
                f"cnn channels must be 1..4 positive ints, got {self.channels}; e.g. channels=16,32"
            )
        if not 2 <= len(self.fc_widths) <= 4 or min(self.fc_widths) < 1:
            raise RefError(
                f"cnn fc_widths must be 2..4 positive ints (3..5 fc layers), got {self.fc_widths}; "
                "e.g. fc_widths=64,32"
            )
        if self.image_size < 2 ** len(self.channels):
            raise RefError(
                f"cnn image_size {self.image_size} is too small for {len(self.channels)} pooling blocks; "
                f"use image_size >= {2 ** len(self.channels)} or fewer channels"
            )
        if self.in_chans < 1 or self.num_classes < 1:
            raise RefError("cnn in_chans and num_classes must be >= 1; e.g. in_chans=1&num_classes=10")


class CNN(SquareImageClassifier, nn.Sequential):
    """Input [B, in_chans, S, S] -> logits [B, num_classes]; blocks are (conv, relu, pool)."""

    config_cls = CNNConfig

    def __init__(self, config: CNNConfig) -> None:
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        chans, side = config.in_chans, config.image_size
        for i, out in enumerate(config.channels, start=1):
            layers[f"block{i}"] = nn.Sequential(
                OrderedDict(conv=nn.Conv2d(chans, out, 3, padding=1), relu=nn.ReLU(), pool=nn.MaxPool2d(2))
            )  # [B, out, side/2, side/2]
            chans, side = out, side // 2
        layers["flatten"] = nn.Flatten()  # [B, chans * side * side]
        fan_in = chans * side * side
        for i, width in enumerate(config.fc_widths, start=1):
            layers[f"fc{i}"] = nn.Sequential(OrderedDict(linear=nn.Linear(fan_in, width), relu=nn.ReLU()))
            fan_in = width
        layers["head"] = nn.Linear(fan_in, config.num_classes)  # [B, num_classes]
        super().__init__(layers)
        self.config = config

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, in_chans, S, S] -> [B, num_classes]."""
        return super().forward(x)
