"""The one dataset type: :class:`ImageDataset`, labelled train and test splits of images (and a validation
split held out of train: :meth:`ImageDataset.with_validation`), in memory or as files.

Images are handed out as floats in [0, 1] at their native (or load) size; a model's
:class:`~stitchcore.models.preprocess.Preprocess` makes its input of them (:meth:`ImageDataset.model_batches`).
Loading by name, the label transforms and the registry are :mod:`.images`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import cached_property

import torch

from stitchcore.data.streaming import ImageFiles, hub_transform
from stitchcore.errors import DataError

__all__ = ["SPLITS", "ImageDataset"]

SPLITS = ("train", "test")  # every dataset has these; "val" is there after with_validation()
VAL = "val"


def balanced_pick(y: torch.Tensor, n: int, num_classes: int, seed: int) -> torch.Tensor:
    """``n`` row indices of labels ``y`` [N], as even over classes as possible (seeded), in dataset order.

    >>> balanced_pick(torch.tensor([0, 0, 0, 1, 1, 1]), 2, 2, seed=0).tolist()
    [2, 5]
    """
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))  # [N]
    rank = torch.empty_like(y)  # position of each row within its class, in shuffled order
    for c in range(num_classes):
        rows = perm[y[perm] == c]
        rank[rows] = torch.arange(len(rows))
    return torch.argsort(rank * num_classes + y)[:n].sort().values  # round-robin over classes


@dataclass(frozen=True, eq=False, repr=False)
class ImageDataset:
    """A labelled image dataset with fixed train and test splits, kept as uint8."""

    name: str  # canonical name; load_dataset(name) rebuilds this dataset, transforms included
    classes: tuple[str, ...]  # class names, index = label; transforms keep them so logits stay aligned
    x_train: torch.Tensor | ImageFiles  # uint8 [N, C, H, W], or files read per batch (imagefolder ?full)
    y_train: torch.Tensor  # int64 [N]
    x_test: torch.Tensor | ImageFiles  # uint8 [M, C, H, W], or files
    y_test: torch.Tensor  # int64 [M]
    x_val: torch.Tensor | ImageFiles | None = None  # held out of train by with_validation(); None: no such split
    y_val: torch.Tensor | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", tuple(str(c) for c in self.classes))
        for split in SPLITS:
            x, y = self._split(split)
            tensor_ok = isinstance(x, ImageFiles) or (x.dtype == torch.uint8 and x.ndim == 4)
            if not tensor_ok or y.dtype != torch.int64 or tuple(y.shape) != tuple(x.shape[:1]):
                raise DataError(
                    f"{self.name}: the {split} split needs uint8 [N,C,H,W] images and int64 [N] labels, "
                    f"got {getattr(x, 'dtype', 'files')} {tuple(x.shape)} and {y.dtype} {tuple(y.shape)}"
                )
            if len(y) == 0:
                raise DataError(f"{self.name}: the {split} split is empty; add examples or use another one")
            if int(y.min()) < 0 or int(y.max()) >= len(self.classes):
                raise DataError(f"{self.name}: {split} labels must lie in 0..{len(self.classes) - 1}")
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            shapes = f"{tuple(self.x_train.shape[1:])} and {tuple(self.x_test.shape[1:])}"
            raise DataError(f"{self.name}: train and test images are {shapes}; resize them to one size")

    def __repr__(self) -> str:
        shape, n, m = "x".join(map(str, self.image_shape)), len(self.y_train), len(self.y_test)
        return f"ImageDataset({self.name!r}, {self.num_classes} classes, {shape}, train={n}, test={m})"

    @property
    def num_classes(self) -> int:
        """Number of classes (label values are 0 .. num_classes-1)."""
        return len(self.classes)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(C, H, W) of one image."""
        c, h, w = self.x_train.shape[1:]
        return int(c), int(h), int(w)

    @cached_property
    def _moments(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Per-channel (mean, std) of x_train in [0, 1] units, exact from 256-bin histograms (files: of 256 of
        them, drawn with seed 0, at the load size)."""
        x = self.x_train
        if isinstance(x, ImageFiles):
            pick = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))[:256].sort().values
            x = torch.stack([x.read(i) for i in pick.tolist()]).mul_(255.0).round_().to(torch.uint8)
        hist = torch.stack([torch.bincount(ch.flatten(), minlength=256) for ch in x.unbind(1)])
        p = hist.double() / hist.sum(1, keepdim=True)  # [C, 256]
        v = torch.arange(256, dtype=torch.float64) / 255.0
        mean = p @ v
        return tuple(mean.tolist()), tuple((p @ (v * v) - mean * mean).clamp_min(0).sqrt().tolist())

    @property
    def mean(self) -> tuple[float, ...]:
        """Per-channel mean of the train images in [0, 1] units (for a Preprocess)."""
        return self._moments[0]

    @property
    def std(self) -> tuple[float, ...]:
        """Per-channel standard deviation of the train images in [0, 1] units."""
        return self._moments[1]

    def _split(self, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        if split not in (*SPLITS, VAL):
            raise DataError(f"unknown split {split!r}; use one of {', '.join((*SPLITS, VAL))}")
        if split == VAL and self.y_val is None:
            raise DataError(f"{self.name} has no validation split; hold one out with with_validation(fraction)")
        return getattr(self, f"x_{split}"), getattr(self, f"y_{split}")

    def validation_size(self, fraction: float) -> int:
        """How many train images :meth:`with_validation` holds out for ``fraction``; DataError where that
        leaves no validation or no training image (a run checks it before it starts)."""
        total = len(self._split("train")[1])
        n = round(fraction * total)
        if not 0 < fraction < 1 or not 1 <= n < total:
            raise DataError(f"a validation split holds 1..{total - 1} of the {total} training images; "
                            f"a fraction of {fraction:g} holds {n} (e.g. 0.1, or 0 for no validation split)")
        return n

    def with_validation(self, fraction: float, seed: int = 0) -> ImageDataset:
        """Hold ``fraction`` of the train split out as the ``val`` split (even over classes, seeded); the test
        split is untouched, so settings chosen on ``val`` never see a test image.  The name stays: the split
        belongs to the run that asks for it (its spec records ``fraction`` and ``seed``).

        >>> from stitchcore.data.images import load_dataset
        >>> v = load_dataset("digits").with_validation(0.1)
        >>> [len(v.labels(s)) for s in ("train", "val", "test")]
        [1212, 135, 450]
        """
        x, y = self._split("train")
        n = self.validation_size(fraction)
        held = torch.zeros(len(y), dtype=torch.bool)
        held[balanced_pick(y, n, self.num_classes, seed)] = True
        return replace(self, x_train=x[~held], y_train=y[~held], x_val=x[held], y_val=y[held])

    @property
    def streamed(self) -> bool:
        """Whether the images are files read per batch (not held in memory)."""
        return isinstance(self.x_train, ImageFiles)

    def images(self, split: str, index: slice | torch.Tensor | None = None) -> torch.Tensor:
        """Float images [B, C, H, W] in [0, 1]; ``index`` selects rows (all when None; files: at the load
        size, read now)."""
        x = self._split(split)[0]
        x = x if index is None else x[index]
        return x.read_all() if isinstance(x, ImageFiles) else x.float().div_(255.0)

    def labels(self, split: str, index: slice | torch.Tensor | None = None) -> torch.Tensor:
        """Labels int64 [B]; ``index`` selects rows (all when None)."""
        y = self._split(split)[1]
        return y if index is None else y[index]

    def class_counts(self, split: str) -> torch.Tensor:
        """Examples per class, int64 [num_classes]."""
        return torch.bincount(self._split(split)[1], minlength=self.num_classes)

    def batches(
        self, split: str, batch_size: int, *, shuffle: bool = False, seed: int = 0, limit: int | None = None,
        transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Yield (images float [B, C, H, W] in [0, 1], labels int64 [B]); the last batch may be short.

        ``shuffle`` draws one permutation from a generator seeded with ``seed`` (same seed, same
        order); ``limit`` caps the number of examples, taken after shuffling.  ``transform`` (a model's
        Preprocess): the batches are its output, the model's input; files are read by DataLoader workers
        and a hub's transform is applied to each original image before they are stacked.
        """
        x, y = self._split(split)
        if batch_size < 1 or (limit is not None and limit < 1):
            raise DataError(f"batch_size and limit must be >= 1 (or limit=None), got {batch_size}, {limit}")
        n = len(y) if limit is None else min(len(y), limit)
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed)) if shuffle else None
        if isinstance(x, ImageFiles):
            yield from x.batches(y, batch_size, order, n, transform)
            return
        for start in range(0, n, batch_size):
            stop = min(start + batch_size, n)
            idx = order[start:stop] if order is not None else slice(start, stop)
            images = x[idx].float().div_(255.0)
            yield (images if transform is None else transform(images)), y[idx]

    def model_batches(
        self, split: str, batch_size: int, preprocess: Callable[[torch.Tensor], torch.Tensor] | None,
        device: torch.device | str = "cpu", *, shuffle: bool = False, seed: int = 0, limit: int | None = None,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Yield (a model's input [B, ...] on ``device``, labels int64 [B] on the CPU), as :meth:`batches`
        orders them.

        In memory: the batch is moved, then ``preprocess`` (a model's Preprocess) runs on ``device``.  Files
        (``imagefolder:...?full``): a hub's transform runs on each original image in the DataLoader workers;
        any other on the batch at the load size, on ``device``.
        """
        if self.streamed and hub_transform(preprocess):
            for x, y in self.batches(split, batch_size, shuffle=shuffle, seed=seed, limit=limit, transform=preprocess):
                yield x.to(device, non_blocking=True), y
            return
        for x, y in self.batches(split, batch_size, shuffle=shuffle, seed=seed, limit=limit):
            x = x.to(device, non_blocking=True)
            yield (x if preprocess is None else preprocess(x)), y

    def model_inputs(
        self, split: str, index: slice | torch.Tensor, preprocess: Callable[[torch.Tensor], torch.Tensor] | None,
        device: torch.device | str = "cpu",
    ) -> torch.Tensor:
        """A model's input [B, ...] on ``device`` for the rows ``index`` of ``split``, as :meth:`model_batches`
        makes it (files: read now, by a few threads; a hub transform on each original file)."""
        x = self._split(split)[0]
        if isinstance(x, ImageFiles) and hub_transform(preprocess):
            return x[index].read_all(preprocess).to(device, non_blocking=True)
        images = (x[index].read_all() if isinstance(x, ImageFiles) else x[index].float().div_(255.0)).to(device)
        return images if preprocess is None else preprocess(images)

    def subset(self, split: str, n: int, seed: int = 0) -> ImageDataset:
        """Keep ``n`` examples of ``split``, as even over classes as possible (seeded), in dataset order."""
        x, y = self._split(split)
        if n < 1:
            raise DataError(f"subset size must be at least 1, got {n}")
        pick = balanced_pick(y, n, self.num_classes, seed)
        name = f"{self.name}|subset{n}s{seed}{'' if split == 'train' else '@' + split}"
        return replace(self, name=name, **{f"x_{split}": x[pick], f"y_{split}": y[pick]})
