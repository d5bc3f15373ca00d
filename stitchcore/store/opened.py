"""The store a notebook call means: a :class:`Store` given as it is, a directory opened once per process (every
later call on it shares that one), or None for the default directory (``resolve_store_dir``)."""

from __future__ import annotations

import threading
from pathlib import Path

from stitchcore.store.records import resolve_store_dir
from stitchcore.store.results import Store

__all__ = ["open_store"]

_OPEN: dict[Path, Store] = {}
_LOCK = threading.Lock()


def open_store(store: Store | str | Path | None = None) -> Store:
    """``store`` itself, else the process's one Store over that directory (None: the default one).

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> open_store(d) is open_store(Path(d))
    True
    """
    if isinstance(store, Store):
        return store
    root = resolve_store_dir(store)
    with _LOCK:
        if root not in _OPEN:
            _OPEN[root] = Store(root)
        return _OPEN[root]
