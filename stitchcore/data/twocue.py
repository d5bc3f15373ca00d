"""Two-cue images: a picture on the left and one on the right, labels correlated so either half suffices.

Each sample is two images side by side, ``[C, H, 2W]``.  In the plain set the right
picture is drawn from the same class as the left one (class ``k`` of the second
source for label ``k``), so a model can read the label from either half.
Variants for evaluation and for training a model that relies on one cue::

    twocue-SOURCE               correlated halves (label = class of both)
    twocue-SOURCE-blackleft     left half zeroed (what the right half alone gives)
    twocue-SOURCE-blackright    right half zeroed
    twocue-SOURCE-decorleft     left picture of a random class; label follows the right one
    twocue-SOURCE-decorright    right picture of a random class; label follows the left one

Sources: ``digits`` (offline: two bundled 8x8 digits, ``[1, 8, 16]``),
``mnist-fashion`` (MNIST digit beside a Fashion-MNIST item, ``[1, 28, 56]``) and
``mnist-cifar10`` (MNIST digit as grey RGB padded to 32x32 beside a CIFAR-10 image,
``[3, 32, 64]``) when those files are under the data root.  Recipes: train on
``twocue-digits`` (the model may use either cue) or on ``twocue-digits-decorright``
(the right half carries no label information, so the model must rely on the left).
Pairs are drawn with fixed seeds, so a name always rebuilds the same images.

>>> from stitchcore.data import load_dataset
>>> ds = load_dataset("twocue-digits-blackleft")
>>> ds.image_shape, int(ds.x_test[:, :, :, :8].max())
((1, 8, 16), 0)
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from stitchcore.data.images import SPLITS, ImageDataset, dataset_loader, register_dataset
from stitchcore.errors import DataError

__all__ = ["SOURCES", "VARIANTS", "is_twocue", "make_twocue", "twocue_variant"]

SOURCES = {"digits": ("digits", "digits"), "mnist-fashion": ("mnist", "fashion-mnist"),
           "mnist-cifar10": ("mnist", "cifar10")}  # fmt: skip  # name -> (left source, right source)
VARIANTS = ("", "blackleft", "blackright", "decorleft", "decorright")
_SPLIT_SEED = {"train": 0, "test": 1}  # partner draws per split


def _load_base(name: str, root: Path, download: bool) -> ImageDataset:
    # Called from inside load_dataset, which holds the dataset cache lock: call the
    # registered loader directly instead of load_dataset (the lock is not re-entrant).
    return dataset_loader(name)(root, download)


def _fit(x: torch.Tensor, c: int, h: int, w: int) -> torch.Tensor:
    """uint8 [N, c0, h0, w0] -> [N, c, h, w]: grey repeated to RGB, zero padding centred."""
    if x.shape[1] != c:
        x = x.repeat(1, c // x.shape[1], 1, 1)
    dh, dw = h - x.shape[2], w - x.shape[3]
    return F.pad(x, (dw // 2, dw - dw // 2, dh // 2, dh - dh // 2)) if dh or dw else x


def _pick(labels: torch.Tensor, want: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """For each wanted class, a random index into ``labels`` with that class; int64 [len(want)]."""
    out = torch.empty(len(want), dtype=torch.int64)
    for k in want.unique().tolist():
        pool = (labels == k).nonzero().flatten()
        rows = (want == k).nonzero().flatten()
        out[rows] = pool[torch.randint(len(pool), (len(rows),), generator=gen)]
    return out


def make_twocue(left: ImageDataset, right: ImageDataset, variant: str = "", name: str = "twocue") -> ImageDataset:
    """Pair every image of ``left`` with one of ``right`` (see the module docstring for variants)."""
    if variant not in VARIANTS:
        raise DataError(f"unknown two-cue variant {variant!r}; use one of {', '.join(v for v in VARIANTS if v)}")
    if left.num_classes != right.num_classes:
        raise DataError(f"two-cue halves need the same number of classes: {left.name} {left.num_classes},"
                        f" {right.name} {right.num_classes}")  # fmt: skip
    c = max(left.image_shape[0], right.image_shape[0])
    h = max(left.image_shape[1], right.image_shape[1])
    w = max(left.image_shape[2], right.image_shape[2])
    k = left.num_classes
    out = {}
    for split in SPLITS:
        gen = torch.Generator().manual_seed(_SPLIT_SEED[split])
        y_l, y_r = left.labels(split), right.labels(split)
        if variant == "decorleft":  # the right half carries the label; the left is any class
            ri = torch.arange(len(y_r))
            label = y_r
            li = _pick(y_l, torch.randint(k, (len(ri),), generator=gen), gen)
        else:
            li = torch.arange(len(y_l))
            label = y_l
            want = torch.randint(k, (len(li),), generator=gen) if variant == "decorright" else y_l
            ri = _pick(y_r, want, gen)
        xl = _fit(left._split(split)[0][li], c, h, w)
        xr = _fit(right._split(split)[0][ri], c, h, w)
        if variant == "blackleft":
            xl = torch.zeros_like(xl)
        if variant == "blackright":
            xr = torch.zeros_like(xr)
        out[f"x_{split}"] = torch.cat([xl, xr], dim=3).contiguous()  # [N, c, h, 2w]
        out[f"y_{split}"] = label.clone()
    classes = left.classes if left.classes == right.classes else tuple(
        f"{a}/{b}" for a, b in zip(left.classes, right.classes, strict=True))  # fmt: skip
    return ImageDataset(name, classes, **out)


def _register(source: str, variant: str) -> None:
    name = f"twocue-{source}" + (f"-{variant}" if variant else "")
    left_name, right_name = SOURCES[source]

    @register_dataset(name)
    def load(root: Path, download: bool) -> ImageDataset:
        left = _load_base(left_name, root, download)
        right = left if right_name == left_name else _load_base(right_name, root, download)
        return make_twocue(left, right, variant, name)


for _source in SOURCES:
    for _variant in VARIANTS:
        _register(_source, _variant)


def is_twocue(dataset: str) -> bool:
    """True for a two-cue dataset name (transforms after ``|`` allowed)."""
    base = dataset.split("|")[0]
    return any(base == f"twocue-{s}" or base.startswith(f"twocue-{s}-") for s in SOURCES)


def twocue_variant(dataset: str, variant: str) -> str:
    """The same two-cue source in another variant, transforms kept: ('twocue-digits|drop3', 'blackleft')
    -> 'twocue-digits-blackleft|drop3'."""
    base, sep, tokens = dataset.partition("|")
    for s in sorted(SOURCES, key=len, reverse=True):
        if base == f"twocue-{s}" or base.startswith(f"twocue-{s}-"):
            if variant not in VARIANTS:
                raise DataError(f"unknown two-cue variant {variant!r}; use one of {', '.join(VARIANTS[1:])}")
            return f"twocue-{s}" + (f"-{variant}" if variant else "") + sep + tokens
    raise DataError(
        f"{dataset!r} is not a two-cue dataset; half-blackout and decorrelated metrics need one, e.g. twocue-digits"
    )
