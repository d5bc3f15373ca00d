"""Importing a bundle: its new runs written into a store in one transaction, once the whole zip has passed.

:func:`import_bundle` checks every entry and member of the zip (:mod:`.bundle_check`: paths, sizes, sha256s,
the manifest's rows, the series), then sorts the runs: one already in the store with the same content is
skipped, one with the same id and other content refuses the bundle, and a run that would take a name another
run holds (``zoo:NAME``, in the store or in the bundle) refuses it too.  The new runs' blobs are staged inside
the store and moved in by :meth:`Store.import_runs <stitchcore.store.results.Store.import_runs>`; any refusal
leaves the store as it was.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

from stitchcore.errors import StoreError
from stitchcore.store.bundle_check import (
    MANIFEST,
    Limits,
    _check_entry,
    _fail,
    _manifest,
    _open_zip,
    _parse_series,
    _read_member,
)
from stitchcore.store.canonical_json import canonical_json, plain_json
from stitchcore.store.claims import run_names, spec_name
from stitchcore.store.results import RunRecord, Store

__all__ = ["ImportReport", "import_bundle"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImportReport:
    """What :func:`import_bundle` did."""

    path: Path  # the zip
    imported: tuple[str, ...]  # run ids written
    skipped: tuple[str, ...]  # run ids already in the store with the same content


def _norm_series(series: dict[str, list[tuple[int, float]]]) -> dict[str, list[tuple[int, float | None]]]:
    return {k: [(s, None if math.isnan(v) else v) for s, v in pts] for k, pts in series.items() if pts}


def _same_content(store: Store, have: RunRecord, run: dict, series: dict) -> bool:
    """Whether the stored run is the bundled one: kind, spec, status, summary, error, curves, blobs."""
    row = run["row"]
    arts = {m["name"]: m["sha256"] for m in run["members"] if m["role"] == "artifact"}
    summary = json.loads(canonical_json(plain_json(row["summary"], "summary", lenient=True)))
    return (have.kind, have.spec, have.status, have.summary, have.error) == (
        row["kind"], run["spec"], row["status"], summary, row["error"]
    ) and {a["name"]: a["sha256"] for a in store.artifacts(have.id)} == arts and _norm_series(
        store.series(have.id)) == _norm_series(series)


def import_bundle(store: Store, path: str | Path, limits: Limits = Limits()) -> ImportReport:  # noqa: B008
    """Check the whole bundle at ``path``, then write its new runs in one transaction.

    A run already in the store with the same content is skipped; one with the same id and other
    content is refused (nothing written).  Every blob must match the manifest's sha256, and again
    the one the store records as it is moved in.
    """
    path = Path(path)
    if store.read_only:
        raise StoreError(f"store {store.root} is read-only: import into a writable --store DIR")
    with _open_zip(path) as zf:
        manifest = _manifest(zf, path, limits)
        declared = {m["path"]: m for run in manifest["runs"] for m in run["members"]}
        names = [i.filename for i in zf.infolist()]
        if len(names) != len(set(names)):
            raise _fail(path, "a member appears twice")
        for info in zf.infolist():
            _check_entry(path, info, limits)
            if info.filename != MANIFEST and info.filename not in declared:
                raise _fail(path, f"member {info.filename!r} is not listed in the manifest")
        total = sum(m["bytes"] for m in declared.values())
        if total > limits.total_bytes:
            raise _fail(path, f"its members add up to {total} bytes, over the cap of {limits.total_bytes}")
        for member, m in declared.items():
            if member not in names:
                raise _fail(path, f"member {member!r} is missing")
            info = zf.getinfo(member)
            if info.file_size != m["bytes"]:
                raise _fail(path, f"member {member!r} is {info.file_size} bytes, over its declared size of"
                                  f" {m['bytes']}" if info.file_size > m["bytes"] else
                                  f"member {member!r} is {info.file_size} bytes, not the {m['bytes']} declared")
        # Every member, streamed and hashed before anything is written; series are parsed.
        series: dict[str, dict] = {}
        for run in manifest["runs"]:
            for m in run["members"]:
                info = zf.getinfo(m["path"])
                if m["role"] == "series" and m["bytes"] > limits.series_bytes:
                    raise _fail(path, f"{m['path']} is over the cap of {limits.series_bytes} bytes")
                with open(os.devnull, "wb") as null:
                    sha, data = _read_member(zf, path, info, m["bytes"], None if m["role"] == "series" else null)
                if sha != m["sha256"]:
                    raise _fail(path, f"sha256 mismatch for member {m['path']!r}")
                if data is not None:
                    series[run["id"]] = _parse_series(path, run["id"], data)
        new, skipped = [], []
        for run in manifest["runs"]:
            have = store.lookup(run["id"])
            if have is None:
                new.append(run)
            elif _same_content(store, have, run, series[run["id"]]):
                skipped.append(run["id"])
            else:
                raise StoreError(f"run {run['id']} is already in {store.root} with different content:"
                                 " delete it there first (Results page), or import into another --store;"
                                 " nothing was imported")
        _check_names(store, path, new)
        if new:
            _write(store, zf, path, new, series)
    log.info("imported %d run(s) from %s, skipped %d", len(new), path, len(skipped))
    return ImportReport(path, tuple(r["id"] for r in new), tuple(skipped))


def _check_names(store: Store, path: Path, runs: list[dict]) -> None:
    """StoreError unless each finished run in ``runs`` (the new ones) that its spec names (a zoo model's
    ``zoo:cnn-digits-s0``) takes a name no other run holds: not one in ``store`` (:func:`run_names`), nor
    another of ``runs``.  A bundle cannot take a name over: ``zoo:NAME`` keeps meaning the weights it meant."""
    named: dict[tuple[str, str], str] = {}  # (kind, name) -> the bundled run that takes it
    for run in runs:
        kind = run["row"]["kind"]
        name = spec_name(kind, run["spec"], run["id"]) if run["row"]["status"] == "done" else None
        if name is None:
            continue
        other = named.setdefault((kind, name), run["id"])
        if other != run["id"]:
            raise _fail(path, f"runs {other} and {run['id']} both take the name {kind}:{name}; a name means one "
                              "model: export the bundle again with only one of them")  # fmt: skip
    for kind in sorted({k for k, _ in named}):
        for rec in store.list_runs(kind=kind, status="done"):
            for name in sorted(run_names(rec)):
                rid = named.get((kind, name))
                if rid is not None and rid != rec.id:
                    raise StoreError(f"run {rid} of {path.name} is named {kind}:{name}, which run {rec.id} "
                                     f"already holds in {store.root}; a bundle cannot take a name over: delete "
                                     f"run {rec.id} there first (Results page), or import into another --store;"
                                     " nothing was imported")  # fmt: skip


def _write(store: Store, zf: zipfile.ZipFile, path: Path, runs: list[dict], series: dict[str, dict]) -> None:
    """Stage the new runs' blobs inside the store (same filesystem), then :meth:`Store.import_runs`."""
    stage = store.root / f".import-{uuid.uuid4().hex}"
    try:
        stage.mkdir()
        batch = []
        for run in runs:
            row, arts = run["row"], {}
            for i, m in enumerate(x for x in run["members"] if x["role"] == "artifact"):
                dest = stage / f"{i}-{run['id']}"
                with open(dest, "wb") as fh:
                    sha, _ = _read_member(zf, path, zf.getinfo(m["path"]), m["bytes"], fh)
                    fh.flush()
                    os.fsync(fh.fileno())
                if sha != m["sha256"]:
                    raise _fail(path, f"sha256 mismatch for member {m['path']!r}")
                arts[m["name"]] = (dest, m["sha256"], m["bytes"])
            rec = RunRecord(run["id"], row["kind"], run["spec"], row["status"], row["summary"], row["error"],
                            float(row["created"]), row["started"], row["finished"], row["label"])
            batch.append((rec, series[run["id"]], arts))
        store.import_runs(batch, source=path.name)
    except OSError as exc:
        raise StoreError(f"cannot write into {store.root} ({exc}): nothing was imported") from exc
    finally:
        shutil.rmtree(stage, ignore_errors=True)
