"""The transforms a dataset's name applies after a ``|`` (``digits|relabel3to8``, ``digits|drop3``,
``digits|subset100s0``, ``digits|noise50s0``, ``digits|coarse2``, ``digits|val300s0``, with ``@train+test`` where a
transform takes splits): the trait transforms applied to an :class:`~stitchcore.data.dataset.ImageDataset`'s labels
(or rows), each naming its result so the name rebuilds it (:func:`stitchcore.data.images.load_dataset` applies
them in order).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import replace

import torch

from stitchcore.data.dataset import SPLITS, ImageDataset, balanced_pick
from stitchcore.errors import DataError

__all__ = ["coarse_classes", "drop_class", "noisy_labels", "relabel", "validation_split"]


def _check_class(ds: ImageDataset, cls: int) -> None:
    if isinstance(cls, bool) or not isinstance(cls, int) or not 0 <= cls < ds.num_classes:
        raise DataError(f"{ds.name}: class {cls!r} does not exist; use an index in 0..{ds.num_classes - 1}")


def _check_splits(splits: Sequence[str]) -> tuple[tuple[str, ...], str]:
    """Validated splits in canonical order and their name suffix ('' for train only)."""
    splits = (splits,) if isinstance(splits, str) else tuple(splits)
    if not splits or any(s not in SPLITS for s in splits):
        raise DataError(f"splits must be a non-empty subset of {SPLITS}, got {splits}")
    ordered = tuple(s for s in SPLITS if s in splits)
    return ordered, "" if ordered == ("train",) else "@" + "+".join(ordered)


def relabel(ds: ImageDataset, src: int, dst: int, *, splits: Sequence[str] = ("train",)) -> ImageDataset:
    """Label every ``src`` example as ``dst`` in ``splits`` ("all cars labelled cat").

    >>> from stitchcore.data import load_dataset
    >>> relabel(load_dataset("digits"), 3, 8).class_counts("train")[3].item()
    0
    """
    for cls in (src, dst):
        _check_class(ds, cls)
    if src == dst:
        raise DataError(f"relabel {src} to {dst} changes nothing; pick two different classes")
    splits, suffix = _check_splits(splits)
    new = {f"y_{s}": torch.where(ds.labels(s) == src, dst, ds.labels(s)) for s in splits}
    return replace(ds, name=f"{ds.name}|relabel{src}to{dst}{suffix}", **new)


def drop_class(ds: ImageDataset, cls: int, *, splits: Sequence[str] = ("train",)) -> ImageDataset:
    """Remove every ``cls`` example from ``splits`` ("class never seen"); class names are kept."""
    _check_class(ds, cls)
    splits, suffix = _check_splits(splits)
    new = {}
    for s in splits:
        x, y = ds._split(s)
        new[f"x_{s}"], new[f"y_{s}"] = x[y != cls], y[y != cls]
    return replace(ds, name=f"{ds.name}|drop{cls}{suffix}", **new)


def noisy_labels(ds: ImageDataset, percent: int, seed: int = 0, *, splits: Sequence[str] = ("train",)) -> ImageDataset:
    """Swap ``percent``% of the labels in ``splits`` for another class, drawn uniformly (seeded): exactly
    round(N * percent / 100) labels become wrong (Bansal et al.'s label-noise models).

    >>> from stitchcore.data import load_dataset
    >>> clean = load_dataset("digits")
    >>> noisy = noisy_labels(clean, 50)
    >>> noisy.name, int((noisy.y_train != clean.y_train).sum()), len(clean.y_train)
    ('digits|noise50s0', 674, 1347)
    """
    if isinstance(percent, bool) or not isinstance(percent, int) or not 0 < percent <= 100:
        raise DataError(f"label noise is a percentage in 1..100, got {percent!r}; e.g. digits|noise50s0")
    splits, suffix = _check_splits(splits)
    gen = torch.Generator().manual_seed(seed)
    new = {}
    for s in splits:
        y = ds.labels(s).clone()  # [N]
        flip = torch.randperm(len(y), generator=gen)[: round(len(y) * percent / 100)]
        shift = torch.randint(1, ds.num_classes, (len(flip),), generator=gen)  # never the true class
        y[flip] = (y[flip] + shift) % ds.num_classes
        new[f"y_{s}"] = y
    return replace(ds, name=f"{ds.name}|noise{percent}s{seed}{suffix}", **new)


# Bansal et al.'s coarse task is CIFAR-10's objects vs animals; other datasets split their classes in order
_COARSE_GROUPS: dict[str, tuple[tuple[int, ...], ...]] = {
    "cifar10": ((0, 1, 8, 9), (2, 3, 4, 5, 6, 7)),  # airplane, automobile, ship, truck | the six animals
}


def coarse_classes(ds: ImageDataset, groups: int = 2) -> ImageDataset:
    """Relabel every example, in both splits, by its group of classes: a coarser task with ``groups`` classes
    (Bansal et al.'s "objects vs animals" model, whose representation is stitched into a fine-task model).
    CIFAR-10 groups as the paper does; other datasets in order of their labels (digits: 0-4 vs 5-9).

    >>> from stitchcore.data import load_dataset
    >>> coarse = coarse_classes(load_dataset("digits"))
    >>> coarse.name, coarse.classes, coarse.y_test[:6].tolist(), load_dataset("digits").y_test[:6].tolist()
    ('digits|coarse2', ('0-4', '5-9'), [0, 0, 0, 1, 0, 0], [2, 0, 4, 9, 4, 1])
    """
    if isinstance(groups, bool) or not isinstance(groups, int) or not 2 <= groups < ds.num_classes:
        raise DataError(f"coarse classes: give 2..{ds.num_classes - 1} groups, got {groups!r}; e.g. digits|coarse2")
    table = _COARSE_GROUPS.get(ds.name)
    if table is None or len(table) != groups:
        bounds = [round(i * ds.num_classes / groups) for i in range(groups + 1)]
        table = tuple(tuple(range(lo, hi)) for lo, hi in itertools.pairwise(bounds))
    group_of = torch.empty(ds.num_classes, dtype=torch.int64)
    for g, members in enumerate(table):
        group_of[list(members)] = g
    names = tuple(f"{ds.classes[m[0]]}-{ds.classes[m[-1]]}" if m == tuple(range(m[0], m[-1] + 1)) and len(m) > 1
                  else "+".join(ds.classes[i] for i in m) for m in table)  # fmt: skip
    return replace(ds, name=f"{ds.name}|coarse{groups}", classes=names,
                   y_train=group_of[ds.y_train], y_test=group_of[ds.y_test])


def validation_split(ds: ImageDataset, n: int, seed: int = 0) -> ImageDataset:
    """Hold out ``n`` training images (as even over classes as possible, seeded) as the *test* split; the rest
    stay the train split.  Settings are chosen on it, never on the test images (``digits|val300s0``).

    >>> from stitchcore.data import load_dataset
    >>> v = validation_split(load_dataset("digits"), 300)
    >>> v.name, len(v.labels("train")), len(v.labels("test"))
    ('digits|val300s0', 1047, 300)
    """
    x, y = ds._split("train")
    if not 1 <= n < len(y):
        raise DataError(f"a validation split holds 1..{len(y) - 1} of the {len(y)} training images, got {n}")
    held = torch.zeros(len(y), dtype=torch.bool)
    held[balanced_pick(y, n, ds.num_classes, seed)] = True  # the rows subset() would keep
    return replace(ds, name=f"{ds.name}|val{n}s{seed}", x_train=x[~held], y_train=y[~held], x_test=x[held],
                   y_test=y[held])  # fmt: skip


_TRANSFORM = re.compile(
    r"(?:relabel(\d+)to(\d+)|drop(\d+)|subset(\d+)s(\d+)|noise(\d+)s(\d+)|val(\d+)s(\d+)|coarse(\d+))"
    r"(?:@([a-z+]+))?"
)


def _apply_transform(ds: ImageDataset, token: str) -> ImageDataset:
    m = _TRANSFORM.fullmatch(token)
    if m is None:
        raise DataError(f"unknown dataset transform {token!r}; use relabelAtoB, dropC, subsetNsS, noisePsS, valNsS "
                        "(+ @test), coarseK")
    src, dst, cls, n, seed, percent, noise_seed, n_val, val_seed, groups, splits = m.groups()
    if groups is not None:
        if splits:
            raise DataError(f"coarse{groups} relabels both splits (a model of the coarse task is scored on it): "
                            f"drop the @{splits}")
        return coarse_classes(ds, int(groups))
    splits = tuple(splits.split("+")) if splits else ("train",)
    if src is not None:
        return relabel(ds, int(src), int(dst), splits=splits)
    if cls is not None:
        return drop_class(ds, int(cls), splits=splits)
    if n_val is not None:
        return validation_split(ds, int(n_val), int(val_seed))
    if percent is not None:
        return noisy_labels(ds, int(percent), int(noise_seed), splits=splits)
    if len(splits) != 1:
        raise DataError(f"subset takes one split (@train or @test), got {token!r}")
    return ds.subset(splits[0], int(n), int(seed))
