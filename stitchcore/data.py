"""Image datasets and the trait transforms applied to their labels.

Every dataset is an :class:`ImageDataset`: uint8 tensors ``[N, C, H, W]`` at the
native size, handed out as floats in [0, 1].  Resizing, channel mapping and
normalisation belong to the model's :class:`~stitchcore.preprocess.Preprocess`.

Names are canonical and rebuild the dataset, transforms included::

    digits                      scikit-learn's bundled 8x8 digits (offline default)
    mnist  fashion-mnist        torchvision files under the data root
    cifar10  cifar100           the python pickle batches under the data root
    imagefolder:PATH?size=32    PATH/train/<class>/*, PATH/test/<class>/* (or val)
    digits|relabel3to8          all train 3s labelled 8 (``@train+test`` for both splits)
    digits|drop3                class 3 removed from train
    digits|subset100s0          a stratified 100 train examples, seed 0

The data root is ``root=``, else ``$STITCHLAB_DATA``, else ``~/.cache/stitchlab/data``.

>>> ds = load_dataset("digits")
>>> ds.image_shape, ds.num_classes, len(ds.y_train), len(ds.y_test)
((1, 8, 8), 10, 1347, 450)
>>> load_dataset("digits|relabel3to8").name
'digits|relabel3to8'
"""

from __future__ import annotations

import codecs
import difflib
import gzip
import logging
import os
import pickle
import re
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import numpy as np
import torch

from .errors import DataError

__all__ = [
    "ImageDataset",
    "SPLITS",
    "clear_cache",
    "data_root",
    "drop_class",
    "list_datasets",
    "load_dataset",
    "register_dataset",
    "relabel",
]

log = logging.getLogger(__name__)

SPLITS = ("train", "test")
_CACHE_SIZE = 8  # loaded base datasets kept in memory (CIFAR-10 is ~180 MB as uint8)


def data_root(root: str | Path | None = None) -> Path:
    """The folder holding dataset files: ``root``, else ``$STITCHLAB_DATA``, else ``~/.cache/stitchlab/data``."""
    if root is None:
        root = os.environ.get("STITCHLAB_DATA") or Path.home() / ".cache" / "stitchlab" / "data"
    return Path(root).expanduser()


@dataclass(frozen=True, eq=False, repr=False)
class ImageDataset:
    """A labelled image dataset with fixed train and test splits, kept as uint8."""

    name: str  # canonical name; load_dataset(name) rebuilds this dataset, transforms included
    classes: tuple[str, ...]  # class names, index = label; transforms keep them so logits stay aligned
    x_train: torch.Tensor  # uint8 [N, C, H, W]
    y_train: torch.Tensor  # int64 [N]
    x_test: torch.Tensor  # uint8 [M, C, H, W]
    y_test: torch.Tensor  # int64 [M]

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", tuple(str(c) for c in self.classes))
        if not self.classes:
            raise DataError(f"{self.name}: no classes; a dataset needs at least one class folder or label")
        for split in SPLITS:
            x, y = getattr(self, f"x_{split}"), getattr(self, f"y_{split}")
            if x.dtype != torch.uint8 or x.ndim != 4 or y.dtype != torch.int64 or y.ndim != 1:
                raise DataError(
                    f"{self.name}: {split} split must be uint8 [N,C,H,W] images and int64 [N] labels, "
                    f"got {x.dtype} {tuple(x.shape)} and {y.dtype} {tuple(y.shape)}"
                )
            if len(x) != len(y):
                raise DataError(f"{self.name}: {split} split has {len(x)} images but {len(y)} labels")
            if len(y) == 0:
                raise DataError(f"{self.name}: the {split} split is empty; add examples or pick another dataset")
            if int(y.min()) < 0 or int(y.max()) >= len(self.classes):
                raise DataError(f"{self.name}: {split} labels must lie in 0..{len(self.classes) - 1}")
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            raise DataError(
                f"{self.name}: train images are {tuple(self.x_train.shape[1:])} but test images are "
                f"{tuple(self.x_test.shape[1:])}; resize them to one size"
            )

    def __repr__(self) -> str:
        c, h, w = self.image_shape
        return (
            f"ImageDataset({self.name!r}, {self.num_classes} classes, {c}x{h}x{w}, "
            f"train={len(self.y_train)}, test={len(self.y_test)})"
        )

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
        c = self.x_train.shape[1]
        s = torch.zeros(c, dtype=torch.float64)
        s2 = torch.zeros(c, dtype=torch.float64)
        for chunk in self.x_train.split(1024):  # float64 chunks: bounded memory for CIFAR
            f = chunk.to(torch.float64) / 255.0  # [b, C, H, W]
            s += f.sum(dim=(0, 2, 3))
            s2 += (f * f).sum(dim=(0, 2, 3))
        n = self.x_train.shape[0] * self.x_train.shape[2] * self.x_train.shape[3]
        mean = s / n
        std = (s2 / n - mean * mean).clamp_min(0).sqrt()
        return tuple(mean.tolist()), tuple(std.tolist())

    @property
    def mean(self) -> tuple[float, ...]:
        """Per-channel mean of the train images in [0, 1] units (for a Preprocess)."""
        return self._moments[0]

    @property
    def std(self) -> tuple[float, ...]:
        """Per-channel standard deviation of the train images in [0, 1] units."""
        return self._moments[1]

    def _split(self, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        if split not in SPLITS:
            raise DataError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
        return getattr(self, f"x_{split}"), getattr(self, f"y_{split}")

    def images(self, split: str, index: slice | torch.Tensor | None = None) -> torch.Tensor:
        """Float images [B, C, H, W] in [0, 1]; ``index`` selects rows (all when None)."""
        x = self._split(split)[0]
        return (x if index is None else x[index]).float().div_(255.0)

    def labels(self, split: str, index: slice | torch.Tensor | None = None) -> torch.Tensor:
        """Labels int64 [B]; ``index`` selects rows (all when None)."""
        y = self._split(split)[1]
        return y if index is None else y[index]

    def class_counts(self, split: str) -> torch.Tensor:
        """Examples per class, int64 [num_classes]."""
        return torch.bincount(self._split(split)[1], minlength=self.num_classes)

    def batches(
        self, split: str, batch_size: int, *, shuffle: bool = False, seed: int = 0, limit: int | None = None
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Yield (images float [B, C, H, W] in [0, 1], labels int64 [B]); the last batch may be short.

        ``shuffle`` draws one permutation from a generator seeded with ``seed`` (same seed, same
        order); ``limit`` caps the number of examples, taken after shuffling.
        """
        x, y = self._split(split)
        if batch_size < 1:
            raise DataError(f"batch_size must be at least 1, got {batch_size}")
        if limit is not None and limit < 1:
            raise DataError(f"limit must be at least 1 (or None for all examples), got {limit}")
        n = len(y) if limit is None else min(len(y), limit)
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed)) if shuffle else None
        for start in range(0, n, batch_size):
            stop = min(start + batch_size, n)
            idx = order[start:stop] if order is not None else slice(start, stop)
            yield x[idx].float().div_(255.0), y[idx]

    def subset(self, split: str, n: int, seed: int = 0) -> ImageDataset:
        """Keep ``n`` examples of ``split``, as many per class as possible (seeded), in dataset order."""
        pick = _stratified(self._split(split)[1], self.num_classes, n, seed)
        x, y = self._split(split)
        suffix = "" if split == "train" else f"@{split}"
        return replace(self, name=f"{self.name}|subset{n}s{seed}{suffix}", **{f"x_{split}": x[pick], f"y_{split}": y[pick]})


def _stratified(y: torch.Tensor, k: int, n: int, seed: int) -> torch.Tensor:
    """Indices of ``n`` rows taken round-robin over classes from a seeded shuffle, sorted. [n]"""
    if n < 1:
        raise DataError(f"subset size must be at least 1, got {n}")
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))  # [N]
    yp = y[perm]
    order = torch.argsort(yp, stable=True)
    counts = torch.bincount(yp, minlength=k)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.empty_like(order)
    rank[order] = torch.arange(len(y)) - starts[yp[order]]  # position of each row within its class
    return perm[torch.argsort(rank * k + yp)[:n]].sort().values


# ---------------------------------------------------------------------------- label transforms


def _check_class(ds: ImageDataset, cls: int) -> int:
    if isinstance(cls, bool) or not isinstance(cls, int) or not 0 <= cls < ds.num_classes:
        raise DataError(f"{ds.name}: class {cls!r} does not exist; use an index in 0..{ds.num_classes - 1}")
    return cls


def _check_splits(splits: Sequence[str]) -> tuple[tuple[str, ...], str]:
    """Validated splits in canonical order and their name suffix ('' for train only)."""
    if isinstance(splits, str):
        splits = (splits,)
    bad = [s for s in splits if s not in SPLITS]
    if bad or not splits:
        raise DataError(f"splits must be a non-empty subset of {SPLITS}, got {tuple(splits)}")
    ordered = tuple(s for s in SPLITS if s in splits)
    return ordered, "" if ordered == ("train",) else "@" + "+".join(ordered)


def relabel(ds: ImageDataset, src: int, dst: int, *, splits: Sequence[str] = ("train",)) -> ImageDataset:
    """Label every ``src`` example as ``dst`` in ``splits`` ("all cars labelled cat").

    >>> relabel(load_dataset("digits"), 3, 8).class_counts("train")[3].item()
    0
    """
    _check_class(ds, src), _check_class(ds, dst)
    if src == dst:
        raise DataError(f"relabel {src} to {dst} changes nothing; pick two different classes")
    splits, suffix = _check_splits(splits)
    new = {}
    for s in splits:
        y = ds.labels(s).clone()
        y[y == src] = dst
        new[f"y_{s}"] = y
    return replace(ds, name=f"{ds.name}|relabel{src}to{dst}{suffix}", **new)


def drop_class(ds: ImageDataset, cls: int, *, splits: Sequence[str] = ("train",)) -> ImageDataset:
    """Remove every ``cls`` example from ``splits`` ("class never seen"); class names are kept."""
    _check_class(ds, cls)
    splits, suffix = _check_splits(splits)
    new = {}
    for s in splits:
        keep = ds.labels(s) != cls
        new[f"x_{s}"], new[f"y_{s}"] = ds._split(s)[0][keep], ds.labels(s)[keep]
    return replace(ds, name=f"{ds.name}|drop{cls}{suffix}", **new)


_TRANSFORMS = re.compile(
    r"^(?:relabel(?P<src>\d+)to(?P<dst>\d+)|drop(?P<cls>\d+)|subset(?P<n>\d+)s(?P<seed>\d+))(?:@(?P<splits>[a-z+]+))?$"
)


def _apply_transform(ds: ImageDataset, token: str) -> ImageDataset:
    m = _TRANSFORMS.match(token)
    if m is None:
        raise DataError(
            f"unknown dataset transform {token!r} in {ds.name}|{token}; use relabelAtoB, dropC or subsetNsSEED, "
            "optionally followed by @train+test"
        )
    splits = tuple(m["splits"].split("+")) if m["splits"] else ("train",)
    if m["src"] is not None:
        return relabel(ds, int(m["src"]), int(m["dst"]), splits=splits)
    if m["cls"] is not None:
        return drop_class(ds, int(m["cls"]), splits=splits)
    if len(splits) != 1:
        raise DataError(f"subset takes one split (@train or @test), got {token!r}")
    return ds.subset(splits[0], int(m["n"]), int(m["seed"]))


# ---------------------------------------------------------------------------- registry and loading


@dataclass(frozen=True)
class _Source:
    load: Callable[[Path], ImageDataset]  # builds the dataset from files under the data root
    download: Callable[[Path], None] | None  # fetches missing files into the root; None = bundled data
    uses_root: bool  # False for bundled data: the root is not part of the cache key


_SOURCES: dict[str, _Source] = {}
_CACHE: OrderedDict[tuple[str, str | None], ImageDataset] = OrderedDict()
_CACHE_LOCK = threading.Lock()  # loads are serialised: two jobs asking for CIFAR read it once


def register_dataset(
    name: str, *, download: Callable[[Path], None] | None = None, uses_root: bool = True
) -> Callable[[Callable[[Path], ImageDataset]], Callable[[Path], ImageDataset]]:
    """Decorator: register ``fn(root) -> ImageDataset`` under ``name`` (a name registers once)."""

    def deco(fn: Callable[[Path], ImageDataset]) -> Callable[[Path], ImageDataset]:
        if name in _SOURCES:
            raise ValueError(f"dataset {name!r} is already registered")
        _SOURCES[name] = _Source(fn, download, uses_root)
        return fn

    return deco


def list_datasets() -> list[str]:
    """Registered dataset names; ``imagefolder:PATH`` works besides these."""
    return sorted(_SOURCES)


def clear_cache() -> None:
    """Forget loaded datasets (after files on disk changed)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def load_dataset(name: str, *, root: str | Path | None = None, download: bool = False) -> ImageDataset:
    """Load a dataset by canonical name (see the module docstring); cached in-process by (name, root).

    ``download=True`` fetches missing torchvision files into the data root (needs a network).
    """
    base, *tokens = name.strip().split("|")
    if base.startswith("imagefolder:"):
        path, size = _parse_imagefolder(base)
        key: tuple[str, str | None] = (_imagefolder_name(path, size), None)
        loader: Callable[[], ImageDataset] = lambda: _load_imagefolder(path, size)  # noqa: E731
    elif base in _SOURCES:
        source = _SOURCES[base]
        where = data_root(root)
        key = (base, str(where.resolve()) if source.uses_root else None)
        if download and source.download is not None:
            source.download(where)
        loader = lambda: source.load(where)  # noqa: E731
    else:
        close = difflib.get_close_matches(base.lower(), list(_SOURCES), n=2)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise DataError(
            f"unknown dataset {base!r}; {hint}choose one of {', '.join(list_datasets())} or imagefolder:PATH"
        )
    with _CACHE_LOCK:
        ds = _CACHE.get(key)
        if ds is None:
            ds = loader()
            _check_coverage(ds)
            log.info("loaded %r", ds)
            _CACHE[key] = ds
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
        _CACHE.move_to_end(key)
    for token in tokens:
        ds = _apply_transform(ds, token)
    return ds


def _check_coverage(ds: ImageDataset) -> None:
    """A freshly loaded dataset must have examples of every class in both splits."""
    for split in SPLITS:
        missing = [ds.classes[i] for i in (ds.class_counts(split) == 0).nonzero().flatten().tolist()]
        if missing:
            raise DataError(f"{ds.name}: no {split} examples for classes {', '.join(missing)}; add some")


def _offline(name: str, where: Path, err: Exception) -> DataError:
    return DataError(
        f"could not download {name} ({err.__class__.__name__}: {err}); you look offline: "
        f"copy the files into {where} and call again without download=True"
    )


@register_dataset("digits", uses_root=False)
def _load_digits(root: Path) -> ImageDataset:
    """scikit-learn's 1,797 8x8 digits (0..16 -> 0..255), fixed stratified 1,347/450 split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    x = torch.from_numpy(np.rint(bunch.images * (255.0 / 16.0)).astype(np.uint8)).unsqueeze(1)  # [1797,1,8,8]
    y = torch.from_numpy(bunch.target.astype(np.int64))
    tr, te = train_test_split(np.arange(len(y)), test_size=0.25, stratify=bunch.target, random_state=0)
    tr, te = torch.from_numpy(tr), torch.from_numpy(te)
    return ImageDataset("digits", tuple(str(i) for i in range(10)), x[tr], y[tr], x[te], y[te])


# ---------------------------------------------------------------------------- MNIST / Fashion-MNIST

_IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def _register_idx(name: str, tv_class: str) -> None:
    def tv(root: Path, train: bool, download: bool = False):
        import torchvision.datasets

        return getattr(torchvision.datasets, tv_class)(str(root), train=train, download=download)

    def download(root: Path) -> None:
        if all((root / tv_class / "raw" / f).is_file() for f in _IDX_FILES):
            return
        try:
            tv(root, True, download=True)
        except (OSError, RuntimeError) as e:
            raise _offline(name, root / tv_class / "raw", e) from e

    def load(root: Path) -> ImageDataset:
        raw = root / tv_class / "raw"
        for f in _IDX_FILES:  # accept the .gz files as published
            if not (raw / f).is_file() and (raw / f"{f}.gz").is_file():
                with gzip.open(raw / f"{f}.gz", "rb") as src, open(raw / f, "wb") as dst:
                    shutil.copyfileobj(src, dst)
        if not all((raw / f).is_file() for f in _IDX_FILES):
            raise DataError(
                f"{name} not found under {root}: put the IDX files in {raw} ({', '.join(_IDX_FILES)}) "
                "or pass download=True when online"
            )
        try:
            train, test = tv(root, True), tv(root, False)
        except (AssertionError, RuntimeError, ValueError, IndexError, OSError) as e:
            raise DataError(f"{name}: the IDX files in {raw} are unreadable ({e}); replace them with the originals") from e
        return ImageDataset(
            name,
            tuple(train.classes),
            train.data.unsqueeze(1).contiguous(),  # [N, 28, 28] -> [N, 1, 28, 28]
            train.targets.long(),
            test.data.unsqueeze(1).contiguous(),
            test.targets.long(),
        )

    register_dataset(name, download=download)(load)


_register_idx("mnist", "MNIST")
_register_idx("fashion-mnist", "FashionMNIST")


# ---------------------------------------------------------------------------- CIFAR (python batches)


def _numpy_globals() -> dict[tuple[str, str], object]:
    """The only callables a CIFAR batch pickle needs: numpy array and dtype reconstruction."""
    try:
        from numpy._core import multiarray, numeric
    except ImportError:  # numpy < 2
        from numpy.core import multiarray, numeric
    table: dict[tuple[str, str], object] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): codecs.encode,  # protocol-2 pickles of bytes
    }
    for pkg in ("numpy.core", "numpy._core"):  # files from numpy 1 and numpy 2
        table[(f"{pkg}.multiarray", "_reconstruct")] = multiarray._reconstruct
        table[(f"{pkg}.multiarray", "scalar")] = multiarray.scalar
        table[(f"{pkg}.numeric", "_frombuffer")] = numeric._frombuffer
    return table


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickler that rebuilds numpy arrays, lists and dicts and refuses any other global."""

    allowed = _numpy_globals()

    def find_class(self, module: str, name: str) -> object:
        try:
            return self.allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a dataset file") from None


def _read_batch(path: Path) -> dict[str, object]:
    """One CIFAR python batch: a dict of numpy arrays and lists (keys decoded to str)."""
    try:
        with open(path, "rb") as f:
            entry = _ArrayUnpickler(f, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as e:
        raise DataError(f"{path} is not a CIFAR python batch ({e}); replace it with the original file") from e
    if not isinstance(entry, dict):
        raise DataError(f"{path} is not a CIFAR python batch (no dict inside); replace it with the original file")
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in entry.items()}


def _register_cifar(name: str, tv_class: str) -> None:
    def files() -> tuple:
        import torchvision.datasets

        c = getattr(torchvision.datasets, tv_class)
        return c, [f for f, _ in c.train_list], [f for f, _ in c.test_list], c.meta["filename"], c.meta["key"]

    def download(root: Path) -> None:
        c, train, test, meta, _ = files()
        if all((root / c.base_folder / f).is_file() for f in [*train, *test, meta]):
            return
        from torchvision.datasets import utils

        try:
            utils.download_and_extract_archive(c.url, str(root), filename=c.filename, md5=c.tgz_md5)
        except (OSError, RuntimeError) as e:
            raise _offline(name, root, e) from e

    def load(root: Path) -> ImageDataset:
        c, train, test, meta, key = files()
        folder = root / c.base_folder
        missing = [f for f in [*train, *test, meta] if not (folder / f).is_file()]
        if missing:
            raise DataError(
                f"{name} not found under {root}: extract {c.filename} so that {folder} holds "
                f"{', '.join([*train, *test, meta])} (missing {', '.join(missing)}) or pass download=True when online"
            )

        def split(names: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
            xs, ys = [], []
            for f in names:
                entry = _read_batch(folder / f)
                labels = entry.get("labels", entry.get("fine_labels"))
                if "data" not in entry or labels is None:
                    raise DataError(f"{folder / f} lacks 'data' or labels; replace it with the original file")
                xs.append(np.asarray(entry["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))  # rows are R,G,B planes
                ys.append(np.asarray(labels, dtype=np.int64))
            return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))

        names = _read_batch(folder / meta).get(key)
        if names is None:
            raise DataError(f"{folder / meta} lacks {key!r}; replace it with the original file")
        classes = tuple(n.decode() if isinstance(n, bytes) else str(n) for n in names)
        return ImageDataset(name, classes, *split(train), *split(test))

    register_dataset(name, download=download)(load)


_register_cifar("cifar10", "CIFAR10")
_register_cifar("cifar100", "CIFAR100")


# ---------------------------------------------------------------------------- imagefolder


def _parse_imagefolder(base: str) -> tuple[Path, tuple[int, int]]:
    """'imagefolder:PATH?size=32' (or size=HxW) -> (absolute path, (H, W))."""
    spec = base[len("imagefolder:") :]
    path, _, query = spec.partition("?")
    if not path:
        raise DataError("imagefolder needs a path: imagefolder:/data/pets?size=32")
    size = (32, 32)
    for part in filter(None, query.split("&")):
        k, _, v = part.partition("=")
        m = re.fullmatch(r"(\d+)(?:x(\d+))?", v)
        if k != "size" or m is None or int(m[1]) < 1:
            raise DataError(f"bad imagefolder option {part!r}; the only option is size=N or size=HxW, e.g. ?size=32")
        size = (int(m[1]), int(m[2] or m[1]))
    return Path(path).expanduser().resolve(), size


def _imagefolder_name(path: Path, size: tuple[int, int]) -> str:
    if size == (32, 32):
        return f"imagefolder:{path}"
    return f"imagefolder:{path}?size={size[0]}" if size[0] == size[1] else f"imagefolder:{path}?size={size[0]}x{size[1]}"


def _load_imagefolder(path: Path, size: tuple[int, int]) -> ImageDataset:
    from PIL import Image, UnidentifiedImageError
    from torchvision.datasets import ImageFolder

    name = _imagefolder_name(path, size)
    layout = f"put images in {path}/train/<class>/ and {path}/test/<class>/ (or val/)"
    if not path.is_dir():
        raise DataError(f"{name}: {path} is not a folder; {layout}")
    test_dir = path / "test" if (path / "test").is_dir() else path / "val"
    if not (path / "train").is_dir() or not test_dir.is_dir():
        raise DataError(f"{name}: missing {'train' if not (path / 'train').is_dir() else 'test'} folder; {layout}")

    def read(p: str) -> np.ndarray:
        try:
            with Image.open(p) as im:
                rgb = im.convert("RGB").resize((size[1], size[0]), Image.Resampling.BILINEAR)
        except (UnidentifiedImageError, OSError) as e:
            raise DataError(f"{name}: cannot read image {p} ({e}); remove or replace it") from e
        return np.asarray(rgb, dtype=np.uint8)  # [H, W, 3]

    folders = {}
    for split, d in (("train", path / "train"), ("test", test_dir)):
        try:
            folders[split] = ImageFolder(str(d), loader=read, allow_empty=True)
        except FileNotFoundError as e:
            raise DataError(f"{name}: no class folders in {d}; {layout}") from e
    classes = folders["train"].classes
    extra = sorted(set(folders["test"].classes) - set(classes))
    if extra:
        raise DataError(f"{name}: classes {', '.join(extra)} are in {test_dir.name}/ but not in train/; add or remove them")
    splits = []
    for split, folder in folders.items():
        empty = [c for c in classes if c not in folder.class_to_idx or folder.targets.count(folder.class_to_idx[c]) == 0]
        if empty:
            where = "train" if split == "train" else test_dir.name
            raise DataError(f"{name}: no {where} images for classes {', '.join(empty)}; add some to {path / where}/<class>/")
        idx = [classes.index(folder.classes[t]) for t in folder.targets]  # test may index classes differently
        x = np.stack([read(p) for p, _ in folder.samples])  # [N, H, W, 3]
        splits += [torch.from_numpy(x).permute(0, 3, 1, 2).contiguous(), torch.tensor(idx, dtype=torch.int64)]
    return ImageDataset(name, tuple(classes), *splits)
