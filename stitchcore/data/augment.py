"""Training-time augmentation of image batches, drawn from a generator of its own (same seed, same images).

Applied to dataset images ([B, C, H, W] floats in [0, 1], before the model's preprocessing) by zoo training:

* ``crop-flip``: zero-pad by an eighth of the side (4 px at 32x32, as for CIFAR), crop back to the size at a
  random offset, flip left-right with probability 1/2: the standard CIFAR recipe;
* ``resized-crop-flip``: a random area of 8-100% of the image with aspect 3/4-4/3, resized back to the size
  (bilinear), flipped with probability 1/2: the standard ImageNet / ImageFolder recipe;
* ``none``: the images as they are (digits: a flipped 2 is not a 2).

>>> g = torch.Generator().manual_seed(0)
>>> augment(torch.rand(4, 3, 32, 32), "crop-flip", g).shape
torch.Size([4, 3, 32, 32])
>>> x = torch.rand(2, 1, 8, 8)
>>> torch.equal(augment(x, "none", g), x)
True
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from stitchcore.errors import DataError

__all__ = ["AUGMENTS", "augment", "check_augment"]

AUGMENTS = ("none", "crop-flip", "resized-crop-flip")
RESIZED_SCALE = (0.08, 1.0)  # area fraction of a random resized crop (torchvision's RandomResizedCrop)
RESIZED_RATIO = (3 / 4, 4 / 3)  # its aspect ratio range


def check_augment(kind: str) -> str:
    """``kind`` if it is one of :data:`AUGMENTS`, else DataError naming them."""
    if kind not in AUGMENTS:
        raise DataError(f"unknown augmentation {kind!r}; use one of: {', '.join(AUGMENTS)}")
    return kind


def augment(x: torch.Tensor, kind: str, gen: torch.Generator) -> torch.Tensor:
    """[B, C, H, W] in [0, 1] -> the same shape, augmented per image by ``kind`` with draws from ``gen``."""
    check_augment(kind)
    if kind == "none":
        return x
    out = _padded_crops(x, gen) if kind == "crop-flip" else _resized_crops(x, gen)
    flip = torch.rand(len(x), generator=gen) < 0.5  # [B]
    out[flip] = out[flip].flip(-1)
    return out


def _padded_crops(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Each image zero-padded by max(1, side // 8) and cropped back at a random offset."""
    b, _, h, w = x.shape
    ph, pw = max(1, h // 8), max(1, w // 8)
    padded = F.pad(x, (pw, pw, ph, ph))
    top = torch.randint(0, 2 * ph + 1, (b,), generator=gen).tolist()
    left = torch.randint(0, 2 * pw + 1, (b,), generator=gen).tolist()
    return torch.stack([padded[i, :, t: t + h, s: s + w] for i, (t, s) in enumerate(zip(top, left, strict=True))])


def _resized_crops(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Each image: a random box (area and aspect as RandomResizedCrop draws them) resized back to H x W."""
    b, _, h, w = x.shape
    crops = []
    for i in range(b):
        box = _box(h, w, gen)
        top, left, bh, bw = box
        crop = x[i: i + 1, :, top: top + bh, left: left + bw]
        crops.append(F.interpolate(crop, size=(h, w), mode="bilinear", align_corners=False, antialias=True))
    return torch.cat(crops)


def _box(h: int, w: int, gen: torch.Generator) -> tuple[int, int, int, int]:
    """(top, left, height, width) of a random crop, as torchvision's RandomResizedCrop.get_params draws it
    (ten tries, then the whole image centred within the ratio range)."""
    area = h * w
    log_ratio = (math.log(RESIZED_RATIO[0]), math.log(RESIZED_RATIO[1]))
    for _ in range(10):
        target = area * float(torch.empty(1).uniform_(*RESIZED_SCALE, generator=gen))
        ratio = math.exp(float(torch.empty(1).uniform_(*log_ratio, generator=gen)))
        bw, bh = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
        if 0 < bw <= w and 0 < bh <= h:
            top = int(torch.randint(0, h - bh + 1, (1,), generator=gen))
            left = int(torch.randint(0, w - bw + 1, (1,), generator=gen))
            return top, left, bh, bw
    ratio = w / h
    if ratio < RESIZED_RATIO[0]:
        bw, bh = w, round(w / RESIZED_RATIO[0])
    elif ratio > RESIZED_RATIO[1]:
        bh, bw = h, round(h * RESIZED_RATIO[1])
    else:
        bw, bh = w, h
    return (h - bh) // 2, (w - bw) // 2, bh, bw
