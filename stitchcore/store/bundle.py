"""Bundles: runs carried between stores as one zip, checked whole before anything is written.

A bundle holds ``manifest.json`` (bundle schema, StitchLab version, creation time, and for each
run its row, its spec and the sha256 and size of each member) and the members:
``runs/<id>/series.json`` (its metric curves) and ``runs/<id>/blobs/<name>`` (its artifacts).
``with_models=True`` adds the zoo runs (checkpoints) that the runs' specs name as ``zoo:NAME``,
so a bundle reproduces on a machine that never trained them.

Import refuses, with one line and nothing written: a member path that leaves the store, a symlink
or special member, a size above the declared one or the caps (zip bombs), a sha256 mismatch, a
missing or malformed manifest, an unknown schema, a damaged, non-zip or empty file.  A run its kind names
(a zoo model, ``zoo:cnn-digits-s0``) is refused when its spec cannot be read to name it (a seed of 2**70, a
malformed ``data_id``), when its summary claims another name (:mod:`stitchcore.store.claims`), and when its
name is already held by another run, in the store or in the bundle: a bundle never takes a name over.

Every value a reader formats is checked by type and range before anything is written (a genuine export
always passes; one bad value refuses the bundle whole): ``NaN``, ``Infinity`` and numbers beyond a float
(``1e999``) are refused where the JSON is parsed (``runs export`` writes none: a missing number is ``null``);
a row's id is 16 hex digits, its kind a short lowercase word, its status a finished one, its label and error
bounded strings, its times finite and between :data:`EARLIEST` and now (plus :data:`CLOCK_SKEW`); a series'
name is a bounded string, each step a whole number in ``0 <= step < 2**53``, each value a number or ``null``;
a summary's headline numbers (:data:`HEADLINE_NUMBERS`) are finite numbers, its other numbers
(:data:`NUMBERS`, :data:`NUMBER_TABLES`) numbers or ``null``, its words (:data:`WORDS`) bounded strings.

>>> summary_problem({"accuracy": 0.91, "base": {"a": 0.95, "b": 0.93}, "ref": "zoo:x"}) is None
True
>>> summary_problem({"accuracy": "ninety"})
"summary field 'accuracy' is 'ninety', not a finite number"

>>> member_problem("runs/ab12/blobs/model.safetensors") is None
True
>>> member_problem("../../etc/passwd")
"member path '../../etc/passwd' escapes the store"
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
import re
import shutil
import stat
import time
import uuid
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import stitchcore
from stitchcore.errors import StoreError
from stitchcore.store.bundle_rows import (
    _FINAL,
    _ID_RE,
    MAX_STEP,
    MAX_WORD,
    _is_number,
    _row_problem,
    _show,
    _time_problem,
    summary_problem,
)
from stitchcore.store.canonical_json import canonical_json, plain_json
from stitchcore.store.claims import contradiction, run_names, spec_name
from stitchcore.store.disk import out_file
from stitchcore.store.results import RunRecord, Store, run_id_for

__all__ = [
    "BUNDLE_SCHEMA",
    "BundleInfo",
    "ImportReport",
    "Limits",
    "export_bundle",
    "import_bundle",
    "member_problem",
    "read_manifest",
    "resolve_runs",
    "summary_problem",
]

log = logging.getLogger(__name__)

BUNDLE_SCHEMA: int = 1  # layout of the zip and its manifest; bump on an incompatible change
MANIFEST = "manifest.json"
_SHA_RE = re.compile(r"[0-9a-f]{64}")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # an artifact name: one path part, as the store allows
_ZOO_RE = re.compile(r"zoo:([^?@\s]+)")  # zoo:NAME[?k=v][@file=...]: the NAME part


@dataclass(frozen=True)
class Limits:
    """Caps that keep a hostile zip from filling the disk or memory (zip bombs)."""

    total_bytes: int = 8 << 30  # every member together, uncompressed
    manifest_bytes: int = 16 << 20  # the manifest itself
    series_bytes: int = 256 << 20  # one run's series.json (parsed in memory)
    ratio: float = 200.0  # uncompressed / compressed, for members above ratio_floor
    ratio_floor: int = 1 << 20  # small members may compress well (JSON) without being bombs


@dataclass(frozen=True)
class BundleInfo:
    """What :func:`export_bundle` wrote."""

    path: Path  # the zip
    runs: tuple[str, ...]  # every run id in it: the ones asked for, then the models they depend on
    models: tuple[str, ...]  # the zoo run ids added by with_models
    members: int  # files in the zip besides the manifest
    bytes: int  # size of the zip file


@dataclass(frozen=True)
class ImportReport:
    """What :func:`import_bundle` did."""

    path: Path  # the zip
    imported: tuple[str, ...]  # run ids written
    skipped: tuple[str, ...]  # run ids already in the store with the same content


def member_problem(name: str) -> str | None:
    """Why a member path is unsafe (absolute, ``..``, a drive letter, backslashes ...), or None.

    >>> member_problem("C:/Windows/x")
    "member path 'C:/Windows/x' escapes the store"
    """
    parts = name.split("/")
    if (not name or name.startswith("/") or "\\" in name or "\x00" in name or re.match(r"[A-Za-z]:", name)
            or any(p in ("", ".", "..") for p in parts)):
        return f"member path {name!r} escapes the store"
    return None


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


# --------------------------------------------------------------------------------------------- import


def _fail(path: Path, why: str) -> StoreError:
    return StoreError(f"{path.name} is not a usable bundle: {why}; nothing was imported")


def _open_zip(path: Path) -> zipfile.ZipFile:
    """The zip at ``path``; StoreError for a missing, empty, non-zip or truncated file."""
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"no bundle file {path}: give the path of a .zip made by `runs export`")
    if path.stat().st_size == 0:
        raise _fail(path, "the file is empty")
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise _fail(path, f"not a zip file, or truncated ({exc})") from None


# Deflate is read a bounded chunk at a time (zipfile passes max_length); bzip2 and LZMA members are inflated a
# whole block per read whatever the size asked for (a 785-byte bzip2 member with lying headers: ~2.8 GB at once)
BOUNDED_COMPRESSION = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


def _check_entry(path: Path, info: zipfile.ZipInfo, limits: Limits) -> None:
    """One zip entry: safe path, a regular file, not encrypted, a sane compression ratio."""
    problem = member_problem(info.filename)
    if problem:
        raise _fail(path, problem)
    mode = info.external_attr >> 16
    if info.is_dir():
        raise _fail(path, f"member {info.filename!r} is a folder entry, not a file")
    if stat.S_ISLNK(mode):
        raise _fail(path, f"member {info.filename!r} is a symlink")
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
        raise _fail(path, f"member {info.filename!r} is a device or special file, not a regular file")
    if info.flag_bits & 0x1:
        raise _fail(path, f"member {info.filename!r} is encrypted")
    if info.compress_type not in BOUNDED_COMPRESSION:  # zipfile inflates bzip2 / LZMA a whole block per read
        raise _fail(path, f"member {info.filename!r} is compressed with method {info.compress_type}; bundles are "
                          "stored or deflated (what `runs export` writes), read in bounded chunks")  # fmt: skip
    if info.file_size > limits.ratio_floor and info.file_size > limits.ratio * max(info.compress_size, 1):
        raise _fail(path, f"member {info.filename!r} compresses {info.file_size / max(info.compress_size, 1):.0f}"
                          f" to 1, above the cap of {limits.ratio:.0f} (a zip bomb?)")


def _read_member(zf: zipfile.ZipFile, path: Path, info: zipfile.ZipInfo, size: int,
                 sink: BinaryIO | None = None) -> tuple[str, bytes | None]:
    """Stream one member (never more than ``size`` + 1 bytes): its sha256, and its bytes when no ``sink``."""
    digest, got, buf = hashlib.sha256(), 0, io.BytesIO() if sink is None else sink
    try:
        with zf.open(info) as fh:
            while chunk := fh.read(min(1 << 20, size + 1 - got)):
                got += len(chunk)
                if got > size:
                    raise _fail(path, f"member {info.filename!r} is over its declared size of {size} bytes")
                digest.update(chunk)
                buf.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, OSError, ValueError) as exc:
        raise _fail(path, f"member {info.filename!r} is damaged ({exc})") from None
    if got != size:
        raise _fail(path, f"member {info.filename!r} is {got} bytes, the manifest says {size}")
    return digest.hexdigest(), buf.getvalue() if sink is None else None


def _need(cond: bool, path: Path, why: str) -> None:
    if not cond:
        raise _fail(path, f"malformed manifest ({why})")


def _check_manifest(path: Path, manifest: Any) -> None:
    """The manifest's shape: schema, runs, rows (every field by type and range), specs and members (ids match
    their specs)."""
    _need(isinstance(manifest, dict), path, "not a JSON object")
    _need(manifest.get("format") == "stitchlab-bundle", path, "no format 'stitchlab-bundle'")
    schema = manifest.get("bundle_schema")
    if schema != BUNDLE_SCHEMA:
        raise _fail(path, f"bundle schema {schema!r} is not the one this StitchLab reads ({BUNDLE_SCHEMA}):"
                          " export it again with this version, or upgrade StitchLab")
    runs = manifest.get("runs")
    _need(isinstance(runs, list) and runs, path, "no runs")
    seen: set[str] = set()
    for i, run in enumerate(runs):
        _need(isinstance(run, dict) and isinstance(run.get("row"), dict) and isinstance(run.get("spec"), dict)
              and isinstance(run.get("members"), list), path, f"run {i}: needs row, spec and members")
        row, rid = run["row"], run.get("id")
        _need(isinstance(rid, str) and bool(_ID_RE.fullmatch(rid)) and rid == row.get("id") and rid not in seen,
              path, f"run {i}: bad or repeated id {_show(rid)} (16 hex digits, once)")
        seen.add(rid)
        problem = _row_problem(row)
        if problem is not None:
            raise _fail(path, f"run {rid}: {problem}")
        try:
            plain_json(row["summary"], "summary", lenient=True)
            same = run_id_for(row["kind"], run["spec"]) == rid
        except StoreError:
            same = False
        _need(same, path, f"run {rid}: the id does not match its kind and spec")
        claim = contradiction(row["kind"], run["spec"], rid, row["summary"])  # e.g. a zoo run's name
        if claim is not None:  # it would answer to a name its spec does not give it: refused, not imported
            raise _fail(path, f"run {rid}: {claim}")
        for name, optional in (("created", False), ("started", True), ("finished", True)):
            if problem := _time_problem(row.get(name), name, optional):
                raise _fail(path, f"run {rid}: {problem}")
        roles = []
        for m in run["members"]:
            _need(isinstance(m, dict) and isinstance(m.get("path"), str) and isinstance(m.get("sha256"), str)
                  and bool(_SHA_RE.fullmatch(m["sha256"])) and type(m.get("bytes")) is int and m["bytes"] >= 0,
                  path, f"run {rid}: bad member {m!r:.80}")
            problem = member_problem(m["path"])
            if problem:
                raise _fail(path, problem)
            if m.get("role") == "series":
                _need(m["path"] == f"runs/{rid}/series.json", path, f"series of run {rid} at {m['path']!r}")
            else:
                _need(m.get("role") == "artifact" and isinstance(m.get("name"), str)
                      and bool(_NAME_RE.fullmatch(m["name"])) and m["path"] == f"runs/{rid}/blobs/{m['name']}",
                      path, f"member {m['path']!r} of run {rid}")
            roles.append(m.get("role"))
        _need(roles.count("series") == 1, path, f"run {rid}: needs one series member")


class _NotFinite(ValueError):
    """A JSON number Python reads but a store cannot keep: NaN, Infinity, or one beyond a float (1e999)."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(f"the number {text:.30} is beyond a float")
    return value


def _no_constant(text: str) -> float:
    raise _NotFinite(f"{text} is not a JSON number: a bundle holds finite numbers, and null for a missing one")


def _loads(data: bytes) -> Any:
    """JSON as ``runs export`` writes it: Python's extensions NaN / Infinity / -Infinity (and 1e999) refused."""
    return json.loads(data, parse_float=_finite_float, parse_constant=_no_constant)


def read_manifest(path: str | Path, limits: Limits = Limits()) -> dict[str, Any]:
    """The bundle's manifest, checked for shape and schema (members are checked by :func:`import_bundle`)."""
    path = Path(path)
    with _open_zip(path) as zf:
        return _manifest(zf, path, limits)


def _manifest(zf: zipfile.ZipFile, path: Path, limits: Limits) -> dict[str, Any]:
    try:
        info = zf.getinfo(MANIFEST)
    except KeyError:
        raise _fail(path, f"no {MANIFEST} (was it made by `python -m stitchcore runs export`?)") from None
    _check_entry(path, info, limits)
    if info.file_size > limits.manifest_bytes:
        raise _fail(path, f"{MANIFEST} is {info.file_size} bytes, over the cap of {limits.manifest_bytes}")
    _, data = _read_member(zf, path, info, info.file_size)
    try:
        manifest = _loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, _NotFinite) as exc:
        raise _fail(path, f"malformed manifest ({exc})") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise _fail(path, f"malformed manifest ({str(exc).splitlines()[0]})") from None
    except RecursionError:
        raise _fail(path, "malformed manifest (nested too deeply)") from None
    try:
        _check_manifest(path, manifest)
    except RecursionError:
        raise _fail(path, "malformed manifest (nested too deeply)") from None
    return manifest


def _parse_series(path: Path, rid: str, data: bytes) -> dict[str, list[tuple[int, float]]]:
    """``series.json`` -> ``{name: [(step, value)]}`` (null -> NaN); refused unless every name is a string of
    at most :data:`MAX_WORD` characters, every step a whole number in ``0 <= step < MAX_STEP`` and every value
    a finite number or null."""
    def bad(why: str) -> StoreError:
        return _fail(path, f"series of run {rid} is malformed ({why})")

    try:
        raw = _loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, _NotFinite) as exc:
        raise bad(str(exc)) from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise bad(str(exc).splitlines()[0]) from None
    except RecursionError:
        raise bad("nested too deeply") from None
    if not isinstance(raw, dict):
        raise bad("not an object")
    out = {}
    for name, pts in raw.items():
        if len(name) > MAX_WORD:
            raise bad(f"a curve name of {len(name):,} characters, over {MAX_WORD:,}")
        if not isinstance(pts, list):
            raise bad(f"curve {name!r:.40} is {_show(pts)}, not a list of [step, value]")
        for pt in pts:
            if not (isinstance(pt, list) and len(pt) == 2):
                raise bad(f"a point of {name!r:.40} is {_show(pt)}, not [step, value]")
            step, value = pt
            if type(step) is not int or not 0 <= step < MAX_STEP:
                raise bad(f"a step of {name!r:.40} is {_show(step)}, not a whole number in 0..2**53-1")
            if value is not None and not _is_number(value):
                raise bad(f"a value of {name!r:.40} is {_show(value)}, not a finite number or null")
        out[name] = [(s, math.nan if v is None else float(v)) for s, v in pts]
    return out


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


def import_bundle(store: Store, path: str | Path, limits: Limits = Limits()) -> ImportReport:
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
