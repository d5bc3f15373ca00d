"""Input transforms that travel with a model.

Datasets hand out images as float tensors in [0, 1] at their native size and
channel count, shape [B, C, H, W].  Each loaded image model carries a
:class:`Preprocess` that turns such a batch into what the model expects:
channel repeat/average, resize, normalisation.  It is a frozen dataclass so it
can be stored in a spec and shown in the UI.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

__all__ = ["Preprocess"]


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

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """[B, C, H, W] floats in [0, 1] -> [B, channels, *size] normalised."""
        if self.channels is not None and x.shape[1] != self.channels:
            if x.shape[1] == 1:
                x = x.expand(-1, self.channels, -1, -1)
            elif self.channels == 1:
                x = x.mean(dim=1, keepdim=True)
            else:
                raise ValueError(f"cannot map {x.shape[1]} channels to {self.channels}")
        if self.size is not None and tuple(x.shape[-2:]) != tuple(self.size):
            kwargs = {"align_corners": False} if self.interpolation in ("bilinear", "bicubic") else {}
            x = F.interpolate(x, size=tuple(self.size), mode=self.interpolation, **kwargs)
        mean = torch.tensor(self.mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        std = torch.tensor(self.std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        return (x - mean) / std

    def describe(self) -> str:
        """Short human form: 'resize 32x32 · 3 ch · mean 0.49,0.48,0.45 · std 0.25,0.24,0.26'."""
        size = f"resize {self.size[0]}x{self.size[1]}" if self.size else "native size"
        chans = f"{self.channels} ch" if self.channels else "data channels"
        mean = ",".join(f"{v:.3g}" for v in self.mean)
        std = ",".join(f"{v:.3g}" for v in self.std)
        return f"{size} · {chans} · mean {mean} · std {std}"

    def to_dict(self) -> dict:
        """JSON-ready dict (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> "Preprocess":
        """Inverse of :meth:`to_dict`."""
        return cls(
            size=tuple(d["size"]) if d.get("size") else None,
            channels=d.get("channels"),
            mean=tuple(d.get("mean", (0.0,))),
            std=tuple(d.get("std", (1.0,))),
            interpolation=d.get("interpolation", "bilinear"),
        )
