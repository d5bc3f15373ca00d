"""What the files of a dataset read from disk were: the identity a zoo recipe records, so that one model name
means one set of files.

``imagefolder:PATH`` and ``file:PATH`` read whatever lies at PATH when the run starts; their names alone do
not say what that was.  :func:`data_identity` gives ``{"path": resolved path, "sha256": fingerprint}``, the
fingerprint a sha256 over the resolved path and, for every file the loader may read (each regular file under
an image folder's ``train/``, ``test/`` and ``val/``; the one text file), its relative path, size and
modification time, from ``stat`` alone: no image is opened or decoded.

The modification time is in it on purpose: an edit that keeps a file's size (a pixel of a BMP, a letter of
a text) changes the fingerprint too.  The price is that a copy which resets the times (``cp`` without ``-p``)
fingerprints differently: the recipe trains again under a new name; a model is never reused for other files.
A path that is missing or unreadable has an identity too (nothing, or an unreadable entry, at that path):
the loader, not the fingerprint, says what is wrong with it.

The same fingerprint keys the in-process copy of a loaded image folder
(:func:`stitchcore.data.images.load_dataset` measures it at every call): zoo training, a stitch, a matrix and
the app all read a folder as its files are now.

>>> data_source("digits|drop3") is None, data_source("imagefolder:~/pets?size=64|drop1")
(True, ('imagefolder', '~/pets'))
>>> data_identity("digits") is None, sorted(data_identity("file:/no/such/corpus.txt"))
(True, ['path', 'sha256'])
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from stitchcore.errors import DataError

__all__ = ["DATA_SPLITS", "data_identity", "data_source", "fingerprint", "is_identity"]

DATA_SPLITS = ("train", "test", "val")  # an image folder's sub-folders its loader reads (val: when no test/)
_VERSION = "stitchlab-files/1"  # first line hashed: a new way of fingerprinting never matches an old one


def data_source(dataset: str) -> tuple[str, str] | None:
    """``(kind, path as written)`` of a dataset read from disk (``imagefolder``, ``file``); None otherwise.

    An image dataset's options (``?size=``) and transforms (``|drop3``) are not part of the path; a text
    file's name is everything after ``file:`` (as :func:`stitchcore.data.text.load_text` reads it).

    >>> data_source("file:/corpora/a|b.txt"), data_source("imagefolder:/data/pets?full")
    (('file', '/corpora/a|b.txt'), ('imagefolder', '/data/pets'))
    """
    name = str(dataset).strip()
    if name.startswith("file:"):
        return "file", name.removeprefix("file:")
    base = name.split("|")[0]
    if base.startswith("imagefolder:"):
        return "imagefolder", base.removeprefix("imagefolder:").partition("?")[0]
    return None


def _resolved(kind: str, path: str) -> Path:
    """``path`` made absolute (``~`` expanded, links followed); DataError for a path the system refuses."""
    try:
        return Path(path).expanduser().resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, a link loop, a name too long
        what = "a folder of images" if kind == "imagefolder" else "a text file"
        why = f"{kind}: path {path[:80]!r} is not usable ({exc}); give the path of {what}"
        raise DataError(why) from None


def _entries(root: Path) -> Iterator[tuple[str, object, object]]:
    """``(relative path, size, mtime_ns)`` of every file under ``root``'s split folders, sorted; links
    followed as the loader follows them, a folder met again through a link once; anything else marked."""
    seen: set[tuple[int, int]] = set()
    stack = [(os.path.join(root, split), split) for split in reversed(DATA_SPLITS)]
    while stack:
        folder, rel = stack.pop()
        try:
            st = os.stat(folder)
        except OSError:
            continue  # no such split (test/ or val/ is enough): nothing there to read
        if not stat.S_ISDIR(st.st_mode):
            yield rel, "not-a-folder", st.st_mtime_ns
            continue
        if (st.st_dev, st.st_ino) in seen:  # a link back up the tree: its files are counted once
            yield rel, "loop", 0
            continue
        seen.add((st.st_dev, st.st_ino))
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            yield rel, "unreadable", 0
            continue
        below = []
        for entry in entries:
            sub = f"{rel}/{entry.name}"
            try:
                est = entry.stat()  # links followed (the loader reads what they point at)
            except OSError:  # a dangling link, a file removed meanwhile
                yield sub, "missing", 0
                continue
            if stat.S_ISDIR(est.st_mode):
                below.append((entry.path, sub))
            elif stat.S_ISREG(est.st_mode):
                yield sub, est.st_size, est.st_mtime_ns
            else:  # a FIFO, a socket, a device: named, never opened
                yield sub, "special", 0
        stack.extend(reversed(below))


def fingerprint(kind: str, path: str | Path) -> str:
    """The sha256 (hex) of what lies at ``path`` for a dataset of ``kind`` (``imagefolder`` or ``file``).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> (d / "train" / "cat").mkdir(parents=True)
    >>> empty = fingerprint("imagefolder", d)
    >>> _ = (d / "train" / "cat" / "0.png").write_bytes(b"x")
    >>> fingerprint("imagefolder", d) != empty, len(empty)
    (True, 64)
    """
    root = _resolved(kind, str(path))
    h = hashlib.sha256(f"{_VERSION}\n{kind}\n".encode())
    h.update(json.dumps(str(root)).encode() + b"\n")  # json: any name (a newline, a stray byte) one line
    if kind == "file":
        try:
            st = root.stat()
            rows: Iterable[tuple[str, object, object]] = [
                (root.name, st.st_size if stat.S_ISREG(st.st_mode) else "not-a-file", st.st_mtime_ns)]
        except OSError:
            rows = [(root.name, "missing", 0)]
    else:
        rows = _entries(root)
    for name, size, mtime in rows:
        h.update(f"{json.dumps(name)}\t{size}\t{mtime}\n".encode())
    return h.hexdigest()


def data_identity(*datasets: str | None) -> dict[str, str] | None:
    """``{"path": ..., "sha256": ...}`` of the files ``datasets`` read (the first one read from disk gives the
    path; the fingerprint covers each distinct one); None when none is read from disk.

    >>> data_identity("digits", None, "digits|drop3") is None
    True
    """
    sources: list[tuple[str, Path]] = []
    for dataset in datasets:
        found = data_source(dataset) if dataset is not None else None
        if found is not None:
            source = (found[0], _resolved(*found))
            if source not in sources:
                sources.append(source)
    if not sources:
        return None
    if len(sources) == 1:
        digest = fingerprint(sources[0][0], sources[0][1])
    else:
        digest = hashlib.sha256("\n".join(fingerprint(k, p) for k, p in sources).encode()).hexdigest()
    return {"path": str(sources[0][1]), "sha256": digest}


def is_identity(value: object) -> bool:
    """Whether ``value`` has the shape :func:`data_identity` gives (what a stored spec's is checked for).

    >>> is_identity({"path": "/data/pets", "sha256": "0" * 64}), is_identity({"path": "/p", "sha256": "x"})
    (True, False)
    """
    if not (isinstance(value, dict) and set(value) == {"path", "sha256"}):
        return False
    path, digest = value["path"], value["sha256"]
    return (isinstance(path, str) and 0 < len(path) <= 4096 and isinstance(digest, str) and len(digest) == 64
            and all(c in "0123456789abcdef" for c in digest))  # fmt: skip
