"""What a run's summary may claim, checked against what its spec determines.

A run id is the hash of its kind and spec, so a spec can be trusted wherever the id is checked (the store, a
bundle's import).  A summary cannot: it is whatever the run (or a bundle's author) wrote.  Where a kind gives
its runs a *name* that other runs refer to (a zoo model's ``zoo:cnn-digits-s0``), the name must come from the
spec: the kind registers how (:func:`register_namer`, from its experiment module, above this floor), names
resolve through :func:`spec_name`, and :func:`contradiction` says where a summary claims another name (a
bundle carrying one is refused).

>>> register_namer("demo-kind", lambda spec, run_id: f"demo-{spec['seed']}")
>>> spec_name("demo-kind", {"seed": 3}, "ab12"), spec_name("other-kind", {}, "ab12")
('demo-3', None)
>>> contradiction("demo-kind", {"seed": 3}, "ab12", {"name": "demo-0", "ref": "demo-kind:demo-0"})
"its summary calls it 'demo-0', but its spec makes it 'demo-3'"
>>> contradiction("demo-kind", {"seed": 3}, "ab12", {"name": "demo-3"}) is None
True
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Namer", "contradiction", "register_namer", "spec_name"]

log = logging.getLogger(__name__)

Namer = Callable[[dict, str], str]  # (spec dict, run id) -> the name the run goes by
_NAMERS: dict[str, Namer] = {}


def register_namer(kind: str, namer: Namer) -> None:
    """Name runs of ``kind`` from their spec (and id) with ``namer`` (registered again: replaced)."""
    _NAMERS[kind] = namer


def spec_name(kind: str, spec: Mapping[str, Any], run_id: str) -> str | None:
    """The name ``spec`` gives a run of ``kind``; None where the kind names nothing (or registered no namer:
    its experiment module is not imported), or a spec this version cannot read."""
    namer = _NAMERS.get(kind)
    if namer is None:
        return None
    try:
        return namer(dict(spec), run_id)
    except Exception as exc:  # noqa: BLE001 - an old or foreign spec: no name from it, said in the log
        log.info("no name from the spec of %s run %s: %s", kind, run_id, exc)
        return None


def contradiction(kind: str, spec: Mapping[str, Any], run_id: str, summary: Mapping[str, Any]) -> str | None:
    """Why ``summary`` contradicts what ``spec`` determines (its ``name``, or the ``ref`` it gives the run),
    in words; None when it does not (or the kind names nothing)."""
    name = spec_name(kind, spec, run_id)
    if name is None:
        return None
    said = summary.get("name")
    if said is not None and said != name:
        return f"its summary calls it {said!r}, but its spec makes it {name!r}"
    ref = summary.get("ref")
    if ref is not None and str(ref).split("?")[0] != f"{kind}:{name}":
        return f"its summary gives it the ref {ref!r}, but its spec makes it {kind}:{name}"
    return None
