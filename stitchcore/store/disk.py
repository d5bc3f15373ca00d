"""The disk under a store: whether a failed write means it is full, said in one line with its free space; and
which paths a file the user names (``--out``) may be written to.

>>> from pathlib import Path
>>> full_disk_message(Path("/"), OSError(28, "No space left on device")).startswith("the disk holding store / is full")
True
>>> full_disk_message(Path("/"), ValueError("bad value")) is None
True
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import stat
from pathlib import Path

from stitchcore.errors import StoreError

__all__ = ["FULL_DISK_BYTES", "full_disk_message", "out_file"]

FULL_DISK_BYTES = 1 << 20  # under this much free space, a failed open or write is the disk being full


def full_disk_message(root: Path, exc: BaseException | None = None) -> str | None:
    """One line for a write that failed because the disk holding store ``root`` is full (``exc``: ENOSPC, a
    library's "No space left on device", SQLite's "disk is full", or its "disk I/O error" with under
    :data:`FULL_DISK_BYTES` free); None otherwise."""
    try:
        free = shutil.disk_usage(root if root.exists() else root.parent).free
    except OSError:
        return None
    said = str(exc or "").lower()
    full = (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or "disk is full" in said or "no space left" in said
    if not full and not (isinstance(exc, sqlite3.DatabaseError) and free < FULL_DISK_BYTES):  # SQLite's I/O error
        return None
    return (f"the disk holding store {root} is full ({free:,} bytes free): free some space there or pass another "
            "--store; results already stored can still be read")  # fmt: skip


def out_file(out: str | Path, example: str = "report.html") -> Path:
    """The path ``out`` (``~`` expanded) when a file may be written there: a new name, or an existing regular
    file (replaced whole).  A folder, a link, a device node, a FIFO or a socket is a ``StoreError`` naming it,
    so ``--out /dev/full`` or a link planted at the name is refused before anything is written.

    >>> out_file("/tmp/new-report.html").name
    'new-report.html'
    >>> out_file("/dev/null")
    Traceback (most recent call last):
    ...
    stitchcore.errors.StoreError: --out /dev/null is a device, not a file: name a new file, e.g. /dev/report.html
    """
    path = Path(out).expanduser()
    if not str(out).strip():
        raise StoreError(f"--out is empty: name the file to write, e.g. {example}")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise StoreError(f"cannot use --out {path} ({exc.strerror or exc}): pass another --out") from None
    if mode is not None and not stat.S_ISREG(mode):
        what = ("a folder" if stat.S_ISDIR(mode) else "a link" if stat.S_ISLNK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
        hint = path / example if stat.S_ISDIR(mode) else path.parent / example
        raise StoreError(f"--out {path} is {what}, not a file: name a new file, e.g. {hint}")
    if path.parent.exists() and not path.parent.is_dir():
        raise StoreError(f"--out {path}: {path.parent} is not a folder; pass another --out")
    return path
