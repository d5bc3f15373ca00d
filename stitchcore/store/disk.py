"""The disk under a store: whether a failed write means it is full, said in one line with its free space.

>>> from pathlib import Path
>>> full_disk_message(Path("/"), OSError(28, "No space left on device")).startswith("the disk holding store / is full")
True
>>> full_disk_message(Path("/"), ValueError("bad value")) is None
True
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path

__all__ = ["FULL_DISK_BYTES", "full_disk_message"]

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
