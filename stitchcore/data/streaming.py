"""Image files read when a batch needs them, at full resolution, through a DataLoader with workers.

An :class:`~stitchcore.data.images.ImageDataset` holds its images either as a uint8 tensor (digits, CIFAR,
a folder squashed at load time) or as :class:`ImageFiles`: the paths alone.  Labels stay in memory; a batch
of files is read by ``DataLoader`` workers, each image brought to the model's input *before* the batch is
stacked, so files of any size batch together and memory does not grow with the dataset:

- a model with a hub's own eval transform (:class:`~stitchcore.models.preprocess.Preprocess` with a crop
  size and a ``resize``) gets that transform applied to the original image: shorter side resized, centre
  crop, normalised, as timm and torchvision do it;
- anything else gets the image at the folder's load size (shorter side resized, centre crop: never
  squashed), then its transform on the batch, as an in-memory dataset's batch would.

Greyscale, palette and RGBA files are converted to RGB (the alpha channel is dropped); a file that cannot
be read stops the run with a one-line :class:`~stitchcore.errors.DataError` naming it.

Every image file is opened through :func:`open_image`, checked before a pixel is decoded: a regular file (a
FIFO, a device node or a socket named ``x.png`` is never opened: it would block or never end), at most
:data:`MAX_PIXELS` pixels as its header declares them (a 40000x40000 PNG of a few kB is a decompression bomb),
and a truncated or garbage file is the same one line naming it.

>>> open_image("/dev/null").__enter__()
Traceback (most recent call last):
...
stitchcore.errors.DataError: /dev/null is a device, not an image file: remove it, or put a real image there
"""

from __future__ import annotations

import os
import stat
import struct
import warnings
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from stitchcore.errors import DataError

__all__ = ["MAX_PIXELS", "ImageFiles", "data_workers", "hub_transform", "open_image", "read_rgb", "shown"]

WORKERS_ENV = "STITCHLAB_DATA_WORKERS"  # DataLoader workers per batch stream (default: half the cores, 1..4)
_IN_PROCESS = 64  # a stream of at most this many files is read in the calling process (no worker start-up)
# Pixels an image file may declare (width x height): 64 megapixels, under PIL's own warning level
# (Image.MAX_IMAGE_PIXELS, ~89 M), so an image it would warn about, or refuse as a bomb, is refused here in one line
MAX_PIXELS = 64_000_000


def data_workers() -> int:
    """Reader processes per batch stream: ``$STITCHLAB_DATA_WORKERS``, else half the cores (1 to 4)."""
    env = os.environ.get(WORKERS_ENV)
    if env:
        try:
            return max(0, int(env))
        except ValueError:
            raise DataError(f"{WORKERS_ENV}={env!r} is not a whole number; set it to 0 (read in the job) or more")
    return max(1, min(4, (os.cpu_count() or 2) // 2))


def shown(path: object) -> str:
    r"""A path as one line: as it is, or as Python writes it when it holds a control character (a newline).

    >>> shown("/data/a.png"), shown("/data/a\nb.png")
    ('/data/a.png', "'/data/a\\nb.png'")
    """
    text = os.fspath(path) if isinstance(path, os.PathLike) else str(path)
    return repr(text) if any(not ch.isprintable() for ch in text) else text


def _file_kind(mode: int) -> str:
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a socket"
            if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")


@contextmanager
def open_image(path: str | os.PathLike, name: str = "") -> Iterator[Any]:
    """The image file at ``path`` opened with PIL (header read, nothing decoded), for a ``with`` block; every
    failure inside the block as well is a one-line :class:`DataError` naming the file (``name``: the dataset,
    put first).  Refused before PIL reads a byte: anything but a regular file (a link is followed); refused
    before a pixel is decoded: more than :data:`MAX_PIXELS` pixels."""
    from PIL import Image, UnidentifiedImageError

    where = f"{name}: " if name else ""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as exc:  # missing, a link loop, no permission, a NUL in the name
        why = getattr(exc, "strerror", None) or str(exc)
        raise DataError(f"{where}cannot read image {shown(path)} ({why}); remove or replace it") from None
    if not stat.S_ISREG(mode):
        raise DataError(f"{where}{shown(path)} is {_file_kind(mode)}, not an image file: remove it, or put a real"
                        " image there")  # fmt: skip
    # PIL warns (stderr) of an image above its own level before the size can be read; this one is refused below
    # in one line whenever PIL would warn (MAX_PIXELS is lower): its warning would only be a second message.
    # Idempotent: filterwarnings drops an equal filter before it inserts one.
    warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
    too_big = (f"{where}{shown(path)} has more than {MAX_PIXELS:,} pixels (a decompression bomb, or a photo too "
               "large to hold): shrink it or remove it from the folder")  # fmt: skip
    try:
        with Image.open(path) as im:
            if im.width * im.height > MAX_PIXELS:
                raise DataError(f"{where}{shown(path)} is {im.width}x{im.height} = {im.width * im.height:,} pixels,"
                                f" over the limit of {MAX_PIXELS:,}: shrink it or remove it from the folder")
            yield im
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):  # PIL's own check, in Image.open
        raise DataError(too_big) from None
    except MemoryError:
        raise DataError(too_big) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError, IndexError, struct.error,
            zlib.error) as exc:  # garbage, truncated, or a format's decoder giving up  # fmt: skip
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise DataError(f"{where}cannot read image {shown(path)} ({why:.200}); remove or replace it") from None


def read_rgb(path: str) -> Any:
    """The file as an RGB PIL image (greyscale, palette and RGBA converted; alpha dropped); DataError if it
    cannot be read (:func:`open_image`)."""
    with open_image(path) as im:
        im.draft("RGB", (im.width, im.height))  # JPEG: no work beyond full size
        return im.convert("RGB")


def resize_crop(image: Any, size: tuple[int, int]) -> Any:
    """The shorter side resized so ``size`` (H, W) fits inside, then the centre cropped to ``size`` (PIL)."""
    from PIL import Image

    h, w = size
    scale = max(h / image.height, w / image.width)
    new = (max(w, round(image.width * scale)), max(h, round(image.height * scale)))
    if new != image.size:
        image = image.resize(new, Image.Resampling.BILINEAR, reducing_gap=None)
    left, top = (image.width - w) // 2, (image.height - h) // 2
    return image.crop((left, top, left + w, top + h))


def hub_transform(transform: Callable | None) -> bool:
    """Whether ``transform`` is a hub's eval transform (crop size and resize): applied to the original file."""
    return getattr(transform, "size", None) is not None and getattr(transform, "resize", None) is not None


@dataclass(frozen=True, eq=False)
class ImageFiles:
    """Images as file paths; indexing gives another ImageFiles (a subset), reading gives tensors.

    ``size``: (H, W) a file is brought to when no hub transform is given (shorter side, centre crop).
    """

    paths: tuple[str, ...]
    size: tuple[int, int]

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """[N, 3, H, W] at the load size, as a uint8 tensor of these images would be."""
        return (len(self.paths), 3, *self.size)

    def __getitem__(self, index: slice | torch.Tensor | np.ndarray) -> ImageFiles:
        """The files at ``index`` (a slice, int64 indices or a bool mask), in that order."""
        if isinstance(index, slice):
            return ImageFiles(self.paths[index], self.size)
        idx = torch.as_tensor(index)
        if idx.dtype == torch.bool:
            idx = idx.nonzero().flatten()
        return ImageFiles(tuple(self.paths[i] for i in idx.tolist()), self.size)

    def read(self, i: int, transform: Callable | None = None) -> torch.Tensor:
        """File ``i`` as [C, H, W]: a hub ``transform``'s output from the original, else floats in [0, 1] at
        the load size."""
        image = read_rgb(self.paths[i])
        if hub_transform(transform):
            return transform(image)[0]
        array = np.asarray(resize_crop(image, self.size), dtype=np.uint8)  # [H, W, 3]
        return torch.from_numpy(array.copy()).permute(2, 0, 1).float().div_(255.0)

    def read_all(self, transform: Callable | None = None) -> torch.Tensor:
        """Every file, stacked: [N, C, H, W] (as :meth:`read`), read by up to :func:`data_workers` threads."""
        if not self.paths:
            return torch.zeros(0, *self.shape[1:])
        if len(self.paths) == 1:
            return self.read(0, transform)[None]
        from concurrent.futures import ThreadPoolExecutor  # PIL decodes without the GIL

        with ThreadPoolExecutor(max(1, min(data_workers(), len(self.paths)))) as pool:
            return torch.stack(list(pool.map(lambda i: self.read(i, transform), range(len(self.paths)))))

    def batches(self, labels: torch.Tensor, batch_size: int, order: torch.Tensor | None, n: int,
                transform: Callable | None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:  # fmt: skip
        """(model input or [0, 1] images [B, C, H, W], labels [B]) over the first ``n`` of ``order``."""
        rows = (order[:n] if order is not None else torch.arange(n)).tolist()
        hub = hub_transform(transform)
        workers = 0 if n <= _IN_PROCESS else data_workers()
        loader = torch.utils.data.DataLoader(
            _Rows(self, rows, transform if hub else None), batch_size=batch_size, shuffle=False,
            num_workers=workers, pin_memory=torch.cuda.is_available(), persistent_workers=False,
        )  # fmt: skip
        start = 0
        try:
            for x in loader:
                y = labels[rows[start : start + len(x)]]
                start += len(x)
                yield (x if hub or transform is None else transform(x)), y
        except DataError as exc:  # from a worker it arrives with the worker's traceback: keep its last line
            if "Original Traceback" not in str(exc):
                raise
            raise DataError(_last_line(str(exc)).removeprefix("stitchcore.errors.DataError: ")) from None


class _Rows(torch.utils.data.Dataset):
    """What a DataLoader worker reads: the files of ``rows`` in order, each brought to one size."""

    def __init__(self, files: ImageFiles, rows: list[int], transform: Callable | None) -> None:
        self.files, self.rows, self.transform = files, rows, transform

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, k: int) -> torch.Tensor:
        return self.files.read(self.rows[k], self.transform)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else text
