"""Canonical JSON: the text the store hashes into run ids and keeps in its JSON columns.

>>> canonical_json(plain_json({"b": 1.0, "a": [1, 2]}, "spec", lenient=False))
'{"a":[1,2],"b":1.0}'
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from stitchcore.errors import StoreError

__all__ = ["canonical_json", "plain_json", "write_atomic"]


def plain_json(obj: Any, path: str, lenient: bool) -> Any:
    """``obj`` as plain JSON, else StoreError naming the offending key under ``path``.

    Strict (specs): finite numbers and JSON types only.  Lenient (summaries):
    NaN/inf become None, numpy/torch scalars and arrays become Python values.
    """
    if obj is None or isinstance(obj, (str, bool, int)):
        return obj
    if isinstance(obj, float):
        if math.isfinite(obj):
            return float(obj)
        if lenient:
            return None
        raise StoreError(f"{path} is {obj}: specs must hold finite numbers; fix the value")
    if isinstance(obj, dict):
        bad = [k for k in obj if not isinstance(k, str)]
        if bad:
            raise StoreError(f"{path} has key {bad[0]!r} ({type(bad[0]).__name__}): use string keys")
        return {k: plain_json(v, f"{path}[{k!r}]", lenient) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain_json(v, f"{path}[{i}]", lenient) for i, v in enumerate(obj)]
    for convert in ("tolist", "item") if lenient else ():  # numpy/torch, without importing them
        if callable(getattr(obj, convert, None)):
            return plain_json(getattr(obj, convert)(), path, lenient)
    raise StoreError(f"{path} is a {type(obj).__name__}, not JSON: use str/int/float/bool/list/dict")


def canonical_json(obj: Any) -> str:
    """Canonical JSON text (the form hashed into run ids and stored in JSON columns)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: a reader never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
