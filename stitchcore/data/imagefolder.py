"""Image folders: ``imagefolder:PATH?size=32`` (``PATH/train/<class>/*``, ``PATH/test/<class>/*`` or ``val``,
squashed to the size in memory) and ``imagefolder:PATH?full`` (the paths kept, read per batch at full resolution
by :mod:`stitchcore.data.streaming`): the name parsed, the class folders and image files found as torchvision's
ImageFolder finds them, and the folder's bounds checked before anything is allocated.

The bounds: ``size`` within 1..:data:`MAX_SIDE` (each side), at most :data:`MAX_CLASSES` class folders whose
names differ by more than case or Unicode form, at most :data:`MAX_ENTRIES` files and folders walked in a split
(each folder once per link loop), every file opened by :func:`~stitchcore.data.streaming.open_image` (regular
files of at most :data:`~stitchcore.data.streaming.MAX_PIXELS` pixels), and the images held in memory (without
``full``) within the machine's free memory.  :func:`stitchcore.data.images.load_dataset` loads and caches them.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from pathlib import Path

import numpy as np
import torch

from stitchcore.data.dataset import ImageDataset
from stitchcore.data.streaming import ImageFiles, open_image, shown
from stitchcore.errors import DataError

__all__ = ["FREE_SHARE", "FULL_SIZE", "IMAGE_EXTENSIONS", "MAX_CLASSES", "MAX_ENTRIES", "MAX_SIDE"]


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
