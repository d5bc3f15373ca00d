"""Readers of the downloaded datasets: MNIST / Fashion-MNIST IDX files and CIFAR pickle batches.

Each registers its names on import (``mnist``, ``fashion-mnist``, ``cifar10``, ``cifar100``).
Files are looked for under :func:`~stitchcore.data.images.data_root`; with ``download=True``
torchvision fetches them first.  CIFAR's pickles are read with an unpickler that only builds
numpy arrays (no code runs from a file).

>>> "cifar10" in list_datasets()
True
"""

from __future__ import annotations

import codecs
import pickle
from pathlib import Path

import numpy as np
import torch

from stitchcore.data.images import ImageDataset, list_datasets, register_dataset  # noqa: F401 (its doctests list the datasets)
from stitchcore.errors import DataError

__all__: list[str] = []  # nothing to call: the loaders are reached through load_dataset(name)


def _offline(name: str, where: Path, err: Exception) -> DataError:
    msg = f"could not download {name} ({type(err).__name__}: {err}); you look offline: copy the files"
    return DataError(f"{msg} into {where} and call again without download=True")


# ---------------------------------------------------------------------------- MNIST / Fashion-MNIST

_IDX_FILES = (
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"
)


def _register_idx(name: str, tv_name: str) -> None:
    """torchvision reads the IDX files (it checks only that they exist, no checksums)."""

    @register_dataset(name)
    def load(root: Path, download: bool) -> ImageDataset:
        import torchvision.datasets

        tv, raw = getattr(torchvision.datasets, tv_name), root / tv_name / "raw"
        if not all((raw / f).is_file() for f in _IDX_FILES):
            if not download:
                raise DataError(
                    f"{name} not found under {root}: put the IDX files in {raw} ({', '.join(_IDX_FILES)}, "
                    "gunzipped) or pass download=True when online"
                )
            try:
                tv(str(root), train=True, download=True)
            except (OSError, RuntimeError) as e:
                raise _offline(name, raw, e) from e
        try:
            train, test = tv(str(root), train=True), tv(str(root), train=False)
        except (AssertionError, RuntimeError, ValueError, IndexError, OSError) as e:
            raise DataError(f"{name}: the IDX files in {raw} are unreadable ({e}); replace them") from e
        xy = [t for d in (train, test) for t in (d.data.unsqueeze(1).contiguous(), d.targets.long())]
        return ImageDataset(name, tuple(train.classes), *xy)


_register_idx("mnist", "MNIST")
_register_idx("fashion-mnist", "FashionMNIST")


# ---------------------------------------------------------------------------- CIFAR (python batches)


def _numpy_globals() -> dict[tuple[str, str], object]:
    """The only callables a CIFAR batch pickle needs: numpy array and dtype reconstruction."""
    try:
        from numpy._core import multiarray, numeric
    except ImportError:  # numpy < 2
        from numpy.core import multiarray, numeric
    table = {("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype}
    table[("_codecs", "encode")] = codecs.encode  # protocol-2 pickles of bytes
    for pkg in ("numpy.core", "numpy._core"):  # files written under numpy 1 and numpy 2
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
        if not isinstance(entry, dict):
            raise pickle.UnpicklingError(f"found a {type(entry).__name__}, not a dict")
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as e:
        raise DataError(f"{path} is not a CIFAR python batch ({e}); replace it with the original file") from e
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in entry.items()}


def _register_cifar(name: str, tv_name: str) -> None:
    """File names and URLs from torchvision; reading is ours (torchvision md5-checks every batch)."""

    @register_dataset(name)
    def load(root: Path, download: bool) -> ImageDataset:
        import torchvision.datasets

        tv = getattr(torchvision.datasets, tv_name)
        folder, meta, key = root / tv.base_folder, tv.meta["filename"], tv.meta["key"]
        train, test = [f for f, _ in tv.train_list], [f for f, _ in tv.test_list]
        if not all((folder / f).is_file() for f in [*train, *test, meta]):
            if not download:
                raise DataError(
                    f"{name} not found under {root}: extract {tv.filename} there so that {folder} holds "
                    f"{', '.join([*train, *test, meta])}, or pass download=True when online"
                )
            try:
                fetch = torchvision.datasets.utils.download_and_extract_archive
                fetch(tv.url, str(root), filename=tv.filename, md5=tv.tgz_md5)
            except (OSError, RuntimeError) as e:
                raise _offline(name, root, e) from e

        def read(files: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
            xs, ys = [], []
            for f in files:
                entry = _read_batch(folder / f)
                labels = entry.get("labels", entry.get("fine_labels"))
                if "data" not in entry or labels is None:
                    raise DataError(f"{folder / f} lacks 'data' or labels; replace it with the original file")
                xs.append(np.asarray(entry["data"], np.uint8).reshape(-1, 3, 32, 32))  # rows are R,G,B planes
                ys.append(np.asarray(labels, dtype=np.int64))
            return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))

        names = _read_batch(folder / meta).get(key)
        if names is None:
            raise DataError(f"{folder / meta} lacks {key!r}; replace it with the original file")
        classes = tuple(n.decode() if isinstance(n, bytes) else str(n) for n in names)
        return ImageDataset(name, classes, *read(train), *read(test))


_register_cifar("cifar10", "CIFAR10")
_register_cifar("cifar100", "CIFAR100")
