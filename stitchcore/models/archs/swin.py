"""A small Swin Transformer for small images, built on timm's ``SwinTransformer``.

A patch embedding to a [B, H, W, C] token map (timm keeps Swin maps channels-last: the
``map_nhwc`` cut layout), stages ``layers.0 .. layers.{k-1}`` of (shifted-)window attention blocks
(each later stage halves the side with patch merging and doubles the width), a final
``norm`` and the pooled linear ``head``.  The defaults (8x8 digits, 2x2 patches: a 4x4 token map,
windows of 2x2 tokens, two stages of two blocks, width 32) train to ~96% on the bundled digits
in about 15 s on a CPU (AdamW, 40 epochs: :data:`Swin.recipe_defaults`).

>>> import torch
>>> m = Swin(SwinConfig())
>>> m(torch.zeros(2, 1, 8, 8)).shape
torch.Size([2, 10])
>>> m.layers[1](m.layers[0](m.patch_embed(torch.zeros(2, 1, 8, 8)))).shape  # [B, H, W, C]
torch.Size([2, 2, 2, 64])
"""

from __future__ import annotations

from dataclasses import dataclass

from timm.models.swin_transformer import SwinTransformer

from stitchcore.errors import RefError
from stitchcore.models.archs._image import SquareImageClassifier

__all__ = ["Swin", "SwinConfig"]


@dataclass(frozen=True)
class SwinConfig:
    """Options of the ``swin`` architecture."""

    in_chans: int = 1  # image channels
    image_size: int = 8  # square input side; patch_size * window * 2^(stages-1) must divide it
    patch_size: int = 2  # pixels per patch side
    width: int = 32  # token width of the first stage; each later stage doubles it
    depths: tuple[int, ...] = (2, 2)  # blocks per stage
    heads: tuple[int, ...] = (2, 4)  # attention heads per stage
    window: int = 2  # attention window side, in tokens (a stage no larger attends over all of itself)
    mlp_ratio: float = 2.0  # hidden width of each block's MLP, as a multiple of the stage width
    num_classes: int = 10  # outputs of head

    def __post_init__(self) -> None:
        if len(self.depths) != len(self.heads) or not 1 <= len(self.depths) <= 4 or min(self.depths) < 1:
            raise RefError(f"swin depths and heads need one positive entry per stage (1..4 stages), got depths="
                           f"{self.depths}, heads={self.heads}; e.g. depths=2,2&heads=2,4")
        if min(self.in_chans, self.image_size, self.patch_size, self.width, self.window, self.num_classes) < 1:
            raise RefError("swin in_chans, image_size, patch_size, width, window and num_classes must be >= 1")
        side = self.image_size // self.patch_size
        if self.image_size % self.patch_size or side % 2 ** (len(self.depths) - 1):
            raise RefError(f"swin image_size {self.image_size} must be patch_size ({self.patch_size}) x a multiple "
                           f"of 2^(stages-1) = {2 ** (len(self.depths) - 1)}; e.g. image_size=8&patch_size=2")
        for k, h in enumerate(self.heads):
            if (self.width * 2**k) % h:
                raise RefError(f"swin stage {k} width {self.width * 2**k} is not a multiple of its heads {h}")


class Swin(SquareImageClassifier, SwinTransformer):
    """Input [B, in_chans, S, S] -> logits [B, num_classes]; token maps [B, H, W, C] in between."""

    config_cls = SwinConfig
    recipe_defaults = {"optimizer": "adamw", "epochs": 40}  # SGD (lr 0.05) leaves it near 40% on digits (measured)

    def __init__(self, config: SwinConfig) -> None:
        super().__init__(
            img_size=config.image_size, patch_size=config.patch_size, in_chans=config.in_chans,
            num_classes=config.num_classes, embed_dim=config.width, depths=config.depths, num_heads=config.heads,
            window_size=config.window, mlp_ratio=config.mlp_ratio, drop_path_rate=0.0,
        )  # fmt: skip
        self.config = config
