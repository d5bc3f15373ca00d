"""Input transforms that travel with a model.

Datasets hand out images as float tensors in [0, 1] at their native size and
channel count, shape [B, C, H, W].  Each loaded image model carries a
:class:`Preprocess` that turns such a batch into what the model expects:
channel repeat/average, resize, normalisation.  It is a frozen dataclass so it
can be stored in a spec and shown in the UI.

Refs spell a preprocessing as options (``file:m.pt?arch=zoo:cnn&mean=0.3&std=0.38&size=8``);
:func:`format_values` / :func:`parse_values` and :func:`format_size` / :func:`parse_size` are
that spelling, and :meth:`Preprocess.with_options` applies it, checked against the channels.

>>> parse_values("mean", format_values((0.485, 0.456, 0.406)))
(0.485, 0.456, 0.406)
>>> parse_size("32"), parse_size("24x32"), format_size((32, 32))
((32, 32), (24, 32), '32')
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F

from stitchcore.errors import RefError

__all__ = ["Preprocess", "format_size", "format_values", "parse_size", "parse_values"]


@dataclass(frozen=True)
class Preprocess:
    """Tensor transform from dataset images to model input.

    >>> p = Preprocess(size=(16, 16), channels=3, mean=(0.5,), std=(0.5,))
    >>> p(torch.zeros(2, 1, 8, 8)).shape
    torch.Size([2, 3, 16, 16])
    """

    size: tuple[int, int] | None = None  # (H, W) the model expects; None keeps the data's size
    channels: int | None = None  # 1 or 3; None keeps the data's channels
    mean: tuple[float, ...] = (0.0,)  # per channel (or one value broadcast)
    std: tuple[float, ...] = (1.0,)  # per channel (or one value broadcast)
    interpolation: str = "bilinear"  # torch interpolate mode for resizing
    # The hubs' eval transform: the shorter side resized to this (aspect kept), then the centre ``size`` cropped
    # (timm: floor(size / crop_pct); torchvision: the weights' resize_size).  None: squashed to ``size`` (the
    # zoo's own models, which were trained so, and every record written before this field).
    resize: int | None = None

    def __call__(self, x: torch.Tensor | Any) -> torch.Tensor:
        """[B, C, H, W] floats in [0, 1] (any H, W; or one PIL image) -> [B, channels, *size] normalised."""
        if not isinstance(x, torch.Tensor):  # a PIL image: [1, C, H, W] in [0, 1]
            x = _pil_to_batch(x, self.channels)
        if self.channels is not None and x.shape[1] != self.channels:
            if x.shape[1] == 1:
                x = x.expand(-1, self.channels, -1, -1)
            elif self.channels == 1:
                x = x.mean(dim=1, keepdim=True)
            elif x.shape[1] == 4 and self.channels == 3:  # RGBA: the alpha channel is dropped
                x = x[:, :3]
            else:
                raise ValueError(f"cannot map {x.shape[1]} channels to {self.channels}")
        if self.size is not None and self.resize is not None:
            x = _center_crop(self._resize(x, _shorter_side_to(tuple(x.shape[-2:]), self.resize)), self.size)
        elif self.size is not None and tuple(x.shape[-2:]) != tuple(self.size):
            x = self._resize(x, tuple(self.size), antialias=False)  # as stored runs computed it
        mean = torch.tensor(self.mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        std = torch.tensor(self.std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        return (x - mean) / std

    def _resize(self, x: torch.Tensor, size: tuple[int, int], antialias: bool = True) -> torch.Tensor:
        """``x`` resized to ``size``; antialiased when shrinking, as PIL and torchvision's transforms are."""
        if tuple(x.shape[-2:]) == tuple(size):
            return x
        smooth = self.interpolation in ("bilinear", "bicubic")
        kwargs = {"align_corners": False, "antialias": antialias} if smooth else {}
        out = F.interpolate(x, size=size, mode=self.interpolation, **kwargs)
        return out.clamp(0.0, 1.0) if self.interpolation == "bicubic" and antialias else out  # PIL clamps too

    def at_size(self, size: int) -> Preprocess:
        """The same transform for a ``size`` x ``size`` input: a hub's crop fraction kept.

        >>> Preprocess(size=(224, 224), resize=256).at_size(32)
        Preprocess(size=(32, 32), channels=None, mean=(0.0,), std=(1.0,), interpolation='bilinear', resize=36)
        """
        resize = None if self.resize is None or not self.size else math.floor(size * self.resize / self.size[0])
        return replace(self, size=(int(size), int(size)), resize=resize)

    def describe(self) -> str:
        """Short human form: 'resize 32x32 · 3 ch · mean 0.49,0.48,0.45 · std 0.25,0.24,0.26'."""
        size = f"resize {self.size[0]}x{self.size[1]}" if self.size else "native size"
        if self.size and self.resize:
            size = f"shorter side {self.resize}, centre {self.size[0]}x{self.size[1]}"
        chans = f"{self.channels} ch" if self.channels else "data channels"
        mean = ",".join(f"{v:.3g}" for v in self.mean)
        std = ",".join(f"{v:.3g}" for v in self.std)
        return f"{size} · {chans} · mean {mean} · std {std}"

    def to_dict(self) -> dict:
        """JSON-ready dict (tuples become lists); ``resize`` only when set (older records have none)."""
        d = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        if d["resize"] is None:
            del d["resize"]
        return d

    def with_options(
        self,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        size: tuple[int, int] | None = None,
    ) -> Preprocess:
        """A copy with the given mean/std/size; RefError when mean/std do not fit the channels.

        >>> Preprocess(channels=3).with_options(mean=(0.5,), std=(0.2, 0.2, 0.2)).std
        (0.2, 0.2, 0.2)
        >>> Preprocess(channels=1).with_options(mean=(0.4, 0.5))
        Traceback (most recent call last):
        ...
        stitchcore.errors.RefError: mean=0.4,0.5 has 2 values but the model takes 1-channel input; \
give 1 value
        """
        resize = self.resize
        if size is not None:  # square: a hub's crop fraction kept; otherwise squashed
            resize = self.at_size(size[0]).resize if size[0] == size[1] else None
        out = replace(
            self,
            mean=self.mean if mean is None else tuple(float(v) for v in mean),
            std=self.std if std is None else tuple(float(v) for v in std),
            size=self.size if size is None else (int(size[0]), int(size[1])),
            resize=resize,
        )
        for key in ("mean", "std"):
            values = getattr(out, key)
            if out.channels and len(values) not in (1, out.channels):
                give = f"{out.channels} values (or 1 for all)" if out.channels > 1 else "1 value"
                raise RefError(
                    f"{key}={format_values(values)} has {len(values)} values but the model takes "
                    f"{out.channels}-channel input; give {give}"
                )
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "Preprocess":
        """Inverse of :meth:`to_dict`."""
        return cls(
            size=tuple(d["size"]) if d.get("size") else None,
            channels=d.get("channels"),
            mean=tuple(d.get("mean", (0.0,))),
            std=tuple(d.get("std", (1.0,))),
            interpolation=d.get("interpolation", "bilinear"),
            resize=d.get("resize"),
        )


def _shorter_side_to(hw: tuple[int, int], short: int) -> tuple[int, int]:
    """(H, W) with the shorter side ``short`` and the aspect kept, as torchvision's ``Resize(int)`` rounds it.

    >>> _shorter_side_to((300, 400), 256), _shorter_side_to((400, 300), 256), _shorter_side_to((8, 8), 235)
    ((256, 341), (341, 256), (235, 235))
    """
    h, w = hw
    if h <= w:
        return short, int(short * w / h)
    return int(short * h / w), short


def _center_crop(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """The centre ``size`` of [B, C, H, W], offsets rounded as torchvision's ``center_crop`` rounds them."""
    h, w = x.shape[-2:]
    th, tw = size
    if th > h or tw > w:  # never after a shorter-side resize to at least the crop; padded as torchvision does
        x = F.pad(x, [(tw - w) // 2 if tw > w else 0, (tw - w + 1) // 2 if tw > w else 0,
                      (th - h) // 2 if th > h else 0, (th - h + 1) // 2 if th > h else 0])  # fmt: skip
        h, w = x.shape[-2:]
    top, left = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
    return x[..., top: top + th, left: left + tw]


def _pil_to_batch(image: Any, channels: int | None) -> torch.Tensor:
    """A PIL image as [1, C, H, W] floats in [0, 1] (RGB for 3-channel models, L for 1-channel ones)."""
    mode = {3: "RGB", 1: "L"}.get(channels or 0, "RGB" if image.mode not in ("L", "RGB") else image.mode)
    array = np.asarray(image.convert(mode), dtype=np.float32) / 255.0
    array = array[:, :, None] if array.ndim == 2 else array
    return torch.from_numpy(array).permute(2, 0, 1).unsqueeze(0).contiguous()


def format_values(values: Sequence[float]) -> str:
    """Per-channel values as a ref option: ``0.30527535`` or ``0.485,0.456,0.406``.

    Each is the shortest text of its float32 value (what :class:`Preprocess` computes
    with), so a model reloaded from the text normalises bit for bit the same.
    """
    return ",".join(str(np.float32(v)) for v in values)


def parse_values(key: str, text: str) -> tuple[float, ...]:
    """``"0.5"`` or ``"0.485,0.456,0.406"`` -> floats; RefError naming ``key`` when malformed.

    ``std`` values must be positive.

    >>> parse_values("std", "0.2,0")
    Traceback (most recent call last):
    ...
    stitchcore.errors.RefError: std=0.2,0 must be positive numbers joined by ',', e.g. std=0.229,0.224,0.225
    """
    example = "mean=0.485,0.456,0.406" if key == "mean" else "std=0.229,0.224,0.225"
    rule = "positive numbers" if key == "std" else "numbers"
    try:
        values = tuple(float(v) for v in str(text).split(","))
    except ValueError:
        values = ()
    bad = not values or any(not math.isfinite(v) for v in values) or (key == "std" and min(values) <= 0)
    if bad:
        raise RefError(f"{key}={text} must be {rule} joined by ',', e.g. {example}")
    return values


def parse_size(text: str) -> tuple[int, int]:
    """``"32"`` (square), ``"24,32"`` or ``"24x32"`` -> (H, W); RefError when malformed."""
    parts = re.split(r"[,x×]", str(text).strip().lower())
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if len(dims) not in (1, 2) or min(dims) < 1:
        raise RefError(f"size={text} must be a side or H,W in pixels, e.g. size=32 or size=24,32")
    return (dims[0], dims[-1])


def format_size(size: Sequence[int]) -> str:
    """(H, W) as a ref option: ``32`` when square, else ``24,32``."""
    h, w = int(size[0]), int(size[-1])
    return str(h) if h == w else f"{h},{w}"
