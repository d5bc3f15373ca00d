"""What a run is in the store: its id (:func:`run_id_for`), its row (:class:`RunRecord`, read by ``_record``),
and where a store lives (:func:`resolve_store_dir`, :data:`DB_NAME`).

A run id hashes kind + canonical spec JSON + :data:`SCHEMA_VERSION`, so an identical spec is a cache hit.

>>> run_id_for("zoo", {"arch": "cnn", "seed": 0}) == run_id_for("zoo", {"seed": 0, "arch": "cnn"})
True
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from stitchcore.store.canonical_json import canonical_json, plain_json

__all__ = ["DB_NAME", "ENV_VAR", "SCHEMA_VERSION", "RunRecord", "default_store_dir", "resolve_store_dir", "run_id_for"]

# Version of what a stored result *means*; hashed into every run id, so bumping
# it makes old results cache misses (they stay listed).  Independent of the
# database layout, which evolves through _schema.MIGRATIONS without invalidating runs.
SCHEMA_VERSION: int = 1

DB_NAME = "stitchlab.sqlite"
ENV_VAR = "STITCHLAB_STORE"


def resolve_store_dir(explicit: str | Path | None = None) -> Path:
    """Store directory: ``explicit`` (``--store``) > ``$STITCHLAB_STORE`` > the default: ``<repo>/cache`` in a
    source checkout (``app.py`` beside the package), else ``$XDG_CACHE_HOME/stitchlab`` (``~/.cache/stitchlab``),
    one store for an installed package's app, CLI and notebooks."""
    for choice in (explicit, os.environ.get(ENV_VAR, "").strip()):
        if choice is not None and str(choice) != "":
            return Path(choice).expanduser().resolve()
    return default_store_dir()


def default_store_dir() -> Path:
    """The store a call that names none uses where ``$STITCHLAB_STORE`` is not set either: ``<repo>/cache`` of a
    source checkout, else ``$XDG_CACHE_HOME/stitchlab`` (``~/.cache/stitchlab``)."""
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "app.py").is_file():
        return checkout / "cache"
    return Path(os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache").expanduser() / "stitchlab"


def run_id_for(kind: str, spec: dict) -> str:
    """First 16 hex chars of sha256 over canonical JSON of kind, spec and SCHEMA_VERSION."""
    plain_json(spec, "spec", lenient=False)
    text = canonical_json({"kind": kind, "spec": spec, "schema": SCHEMA_VERSION})
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


@dataclass(frozen=True)
class RunRecord:
    """One row of the runs table."""

    id: str  # run_id_for(kind, spec)
    kind: str  # experiment kind: "zoo", "stitch", "matrix" ...
    spec: dict  # the resolved spec, as hashed into the id
    status: str  # one of STATUSES
    summary: dict  # result metrics ({} until done); NaN stored as None
    error: str | None  # one-line message for failed/cancelled/interrupted runs
    created: float  # time.time() when the row was (re)created
    started: float | None  # when it last began running
    finished: float | None  # when it reached a final status
    label: str  # short human label for lists and plots
    imported: float | None = None  # when this store imported it from a bundle; None: computed here
    imported_from: str | None = None  # the bundle's file name, when imported


_RUN_COLS = "id, kind, spec, status, summary, error, created, started, finished, label"
_ORIGIN_COLS = "imported, imported_from"  # database version 3 (NULLs from an older read-only store)


def _record(row: tuple) -> RunRecord:
    rid, kind, spec, status, summary, *rest = row  # rest: error, created, started, finished, label, origin
    return RunRecord(rid, kind, json.loads(spec), status, json.loads(summary) if summary else {}, *rest)
