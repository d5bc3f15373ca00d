"""What a run's summary may claim, checked against what its spec determines.

A run id is the hash of its kind and spec, so a spec can be trusted wherever the id is checked (the store, a
bundle's import).  A summary cannot: it is whatever the run (or a bundle's author) wrote.  Where a kind gives
its runs a *name* that other runs refer to (a zoo model's ``zoo:cnn-digits-s0``), the name must come from the
spec: the kind registers how (:func:`register_namer`, from its experiment module, above this floor), names
resolve through :func:`spec_name`, :func:`run_names` says which names a stored run answers to, and
:func:`contradiction` says where a summary claims another name, or where a spec cannot be read to name the run
at all (a bundle carrying either is refused).

>>> register_namer("demo-kind", lambda spec, run_id: f"demo-{spec['seed']}")
>>> spec_name("demo-kind", {"seed": 3}, "ab12"), spec_name("other-kind", {}, "ab12")
('demo-3', None)
>>> contradiction("demo-kind", {"seed": 3}, "ab12", {"name": "demo-0", "ref": "demo-kind:demo-0"})
"its summary calls it 'demo-0', but its spec makes it 'demo-3'"
>>> contradiction("demo-kind", {"seed": 3}, "ab12", {"name": "demo-3"}) is None
True
>>> contradiction("demo-kind", {"sed": 3}, "ab12", {})
"its spec cannot be read by this StitchLab (KeyError: 'seed'): upgrade StitchLab, or leave the run out"
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from stitchcore.errors import StitchError

if TYPE_CHECKING:
    from stitchcore.store.records import RunRecord

__all__ = ["Namer", "contradiction", "register_namer", "run_names", "spec_name"]

log = logging.getLogger(__name__)

Namer = Callable[[dict, str], str]  # (spec dict, run id) -> the name the run goes by
_NAMERS: dict[str, Namer] = {}


def register_namer(kind: str, namer: Namer) -> None:
    """Name runs of ``kind`` from their spec (and id) with ``namer`` (registered again: replaced)."""
    _NAMERS[kind] = namer


def _naming(kind: str, spec: Mapping[str, Any], run_id: str) -> tuple[str | None, str | None]:
    """``(the name spec gives the run, None)``; ``(None, why)`` for a spec the kind's namer cannot read;
    ``(None, None)`` where the kind names nothing."""
    namer = _NAMERS.get(kind)
    if namer is None:
        return None, None
    try:
        return namer(dict(spec), run_id), None
    except Exception as exc:  # noqa: BLE001 - an old, foreign or forged spec: whatever the namer raised, in words
        text = str(exc).splitlines()[0] if str(exc).strip() else ""
        why = text if isinstance(exc, StitchError) else f"{type(exc).__name__}: {text}".rstrip(": ")
        return None, why[:200]


def spec_name(kind: str, spec: Mapping[str, Any], run_id: str) -> str | None:
    """The name ``spec`` gives a run of ``kind``; None where the kind names nothing (or registered no namer:
    its experiment module is not imported), or a spec this version cannot read."""
    name, why = _naming(kind, spec, run_id)
    if why is not None:
        log.info("no name from the spec of %s run %s: %s", kind, run_id, why)
    return name


def run_names(rec: RunRecord) -> set[str]:
    """The names stored run ``rec`` answers to: the one its spec gives it; a run made in this store also the
    one its summary records, an imported one never (a bundle's summary could claim any name), not even when
    no name comes from its spec.  A run made here of a kind with no namer registered: its summary's.

    >>> from stitchcore.store.results import RunRecord
    >>> made = RunRecord("ab12", "demo-kind", {"seed": 3}, "done", {"name": "old-3"}, None, 0.0, None, None, "")
    >>> sorted(run_names(made))
    ['demo-3', 'old-3']
    """
    said = rec.summary.get("name")
    summary = {said} if isinstance(said, str) and not rec.imported else set()
    derived = spec_name(rec.kind, rec.spec, rec.id)
    return summary if derived is None else {derived} | summary


def contradiction(kind: str, spec: Mapping[str, Any], run_id: str, summary: Mapping[str, Any]) -> str | None:
    """Why ``summary`` contradicts what ``spec`` determines (its ``name``, or the ``ref`` it gives the run), or
    why ``spec`` cannot be read to name the run at all (a seed of 2**70, a malformed field: a run that would
    answer to no name, or to a name its summary chose), in words; None when neither (or the kind names
    nothing)."""
    name, why = _naming(kind, spec, run_id)
    if why is not None:
        return f"its spec cannot be read by this StitchLab ({why}): upgrade StitchLab, or leave the run out"
    if name is None:
        return None
    said = summary.get("name")
    if said is not None and said != name:
        return f"its summary calls it {said!r}, but its spec makes it {name!r}"
    ref = summary.get("ref")
    if ref is not None and str(ref).split("?")[0] != f"{kind}:{name}":
        return f"its summary gives it the ref {ref!r}, but its spec makes it {kind}:{name}"
    return None
