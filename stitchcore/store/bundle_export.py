"""Writing a bundle: runs (and, with ``with_models``, the zoo models their specs name) as one zip.

:func:`resolve_runs` turns run ids (or ``zoo:NAME``) into finished records; :func:`export_bundle` writes their
rows, specs, curves (``runs/<id>/series.json``) and artifacts (``runs/<id>/blobs/<name>``) with a manifest
of each member's sha256 and size, in the layout :mod:`.bundle_check` reads (:data:`MANIFEST`,
:data:`BUNDLE_SCHEMA`): a temp file, then a rename, each blob hashed again as it is copied.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import time
import uuid
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import stitchcore
from stitchcore.errors import StoreError
from stitchcore.store.bundle_check import BUNDLE_SCHEMA, MANIFEST
from stitchcore.store.bundle_rows import _FINAL
from stitchcore.store.canonical_json import canonical_json, plain_json
from stitchcore.store.claims import run_names
from stitchcore.store.disk import out_file
from stitchcore.store.results import RunRecord, Store

__all__ = ["BundleInfo", "export_bundle", "resolve_runs"]

log = logging.getLogger(__name__)

_ZOO_RE = re.compile(r"zoo:([^?@\s]+)")  # zoo:NAME[?k=v][@file=...]: the NAME part


@dataclass(frozen=True)
class BundleInfo:
    """What :func:`export_bundle` wrote."""

    path: Path  # the zip
    runs: tuple[str, ...]  # every run id in it: the ones asked for, then the models they depend on
    models: tuple[str, ...]  # the zoo run ids added by with_models
    members: int  # files in the zip besides the manifest
    bytes: int  # size of the zip file



def _zoo_names(value: Any) -> set[str]:
    """Every zoo model NAME a spec mentions as ``zoo:NAME...``, at any depth.

    >>> sorted(_zoo_names({"a": "zoo:cnn-digits-s0", "b": ["zoo:x?init=random&seed=1", "timm:r"]}))
    ['cnn-digits-s0', 'x']
    """
    if isinstance(value, str):
        m = _ZOO_RE.fullmatch(value.split("@", 1)[0].split("?", 1)[0])
        return {m.group(1)} if m else set()
    if isinstance(value, dict):
        return set().union(*(_zoo_names(v) for v in value.values()))
    if isinstance(value, (list, tuple)):
        return set().union(*(_zoo_names(v) for v in value))
    return set()


def _zoo_runs(store: Store) -> dict[str, RunRecord]:
    """Trained zoo models by NAME, as ``zoo:NAME`` resolves them: by the names :func:`run_names` gives (its
    summary's where none comes from its spec: no namer registered), one made in this store before an
    imported one, else the newest."""
    out: dict[str, RunRecord] = {}
    runs = store.list_runs(kind="zoo", status="done")  # newest first; sorted() below keeps that order
    for rec in sorted(runs, key=lambda r: r.imported is not None):
        said = rec.summary.get("name")
        for name in sorted(run_names(rec) or ({said} if isinstance(said, str) else set())):
            out.setdefault(name, rec)
    return out


def resolve_runs(store: Store, wanted: Iterable[str], *, verb: str = "export") -> list[RunRecord]:
    """Run ids (or ``zoo:NAME``) -> finished records, each once; StoreError names an unknown or unfinished one."""
    zoo = None
    out: dict[str, RunRecord] = {}
    for key in wanted:
        rec = store.lookup(key)
        if rec is None and key.startswith("zoo:"):
            zoo = zoo if zoo is not None else _zoo_runs(store)
            rec = zoo.get(key[4:])
        if rec is None:
            raise StoreError(f"unknown run id {key!r} in {store.root}: see `python -m stitchcore runs list`")
        if rec.status not in _FINAL:
            raise StoreError(f"run {rec.id} is {rec.status}: {verb} it once it has finished")
        out.setdefault(rec.id, rec)
    if not out:
        raise StoreError(f"no runs to {verb}: name run ids (see `python -m stitchcore runs list`)")
    return list(out.values())


def _series_json(store: Store, run_id: str) -> bytes:
    """A run's curves as JSON bytes: ``{name: [[step, value or null], ...]}`` (null stands for NaN, and for
    an infinite value a diverged run logged: JSON has no infinity)."""
    data = {k: [[s, v if math.isfinite(v) else None] for s, v in pts] for k, pts in store.series(run_id).items()}
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _row(rec: RunRecord) -> dict[str, Any]:
    return {"id": rec.id, "kind": rec.kind, "status": rec.status, "summary": rec.summary, "error": rec.error,
            "created": rec.created, "started": rec.started, "finished": rec.finished, "label": rec.label}


def export_bundle(store: Store, run_ids: Iterable[str], out: str | Path, with_models: bool = False) -> BundleInfo:
    """Write the runs (ids, or ``zoo:NAME``) as a bundle zip at ``out`` (temp file, then rename).

    ``with_models``: add the zoo runs their specs name, so the bundle reproduces elsewhere.
    Each blob is checked against the sha256 the store recorded before it goes in.
    """
    recs = resolve_runs(store, run_ids)
    models: list[str] = []
    if with_models:
        zoo, todo, seen = None, list(recs), {r.id for r in recs}
        while todo:
            rec = todo.pop(0)
            for name in sorted(_zoo_names(rec.spec)):
                zoo = zoo if zoo is not None else _zoo_runs(store)
                dep = zoo.get(name)
                if dep is None:
                    raise StoreError(f"run {rec.id} uses zoo:{name}, which is not in {store.root}:"
                                     " export without --with-models, or train it first")
                if dep.id not in seen:
                    seen.add(dep.id)
                    recs.append(dep)
                    models.append(dep.id)
                    todo.append(dep)
    entries, files = [], []  # manifest entries; (member path, source path or bytes, sha256)
    for rec in recs:
        series = _series_json(store, rec.id)
        sha = hashlib.sha256(series).hexdigest()
        members = [{"path": f"runs/{rec.id}/series.json", "role": "series", "sha256": sha, "bytes": len(series)}]
        files.append((members[0]["path"], series, sha))
        for art in store.artifacts(rec.id):
            path = store.artifact_path(rec.id, art["name"])  # verifies the recorded sha256
            member = f"runs/{rec.id}/blobs/{art['name']}"
            members.append({"path": member, "role": "artifact", "name": art["name"], "sha256": art["sha256"],
                            "bytes": art["bytes"]})
            files.append((member, path, art["sha256"]))
        entries.append({"id": rec.id, "row": _row(rec), "spec": rec.spec, "model": rec.id in models,
                        "members": members})
    manifest = {"format": "stitchlab-bundle", "bundle_schema": BUNDLE_SCHEMA, "stitchlab": stitchcore.__version__,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": entries}
    out = out_file(out, "bundle.zip")
    tmp = out.with_name(f".tmp-{uuid.uuid4().hex}-{out.name}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(MANIFEST, canonical_json(plain_json(manifest, "manifest", lenient=True)))
            for member, src, sha in files:
                _write_member(zf, member, src, sha)
        os.replace(tmp, out)
    except OSError as exc:
        raise StoreError(f"cannot write {out} ({exc}): pass another --out") from exc
    finally:
        tmp.unlink(missing_ok=True)  # gone after the rename; a half-written zip otherwise
    log.info("exported %d run(s) to %s", len(recs), out)
    return BundleInfo(out, tuple(r.id for r in recs), tuple(models), len(files), out.stat().st_size)


def _write_member(zf: zipfile.ZipFile, member: str, src: Path | bytes, sha: str) -> None:
    """Add one member, hashing what is copied: a blob changed since it was verified is refused."""
    if isinstance(src, bytes):
        zf.writestr(member, src)
        return
    digest = hashlib.sha256()
    with open(src, "rb") as fh, zf.open(member, "w", force_zip64=True) as dst:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
            dst.write(chunk)
    if digest.hexdigest() != sha:
        raise StoreError(f"{src} changed while it was exported: run `python -m stitchcore runs check`")
