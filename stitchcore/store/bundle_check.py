"""Reading an untrusted bundle: the zip, its manifest and its members, checked before anything is written.

:func:`read_manifest` opens the zip and checks its manifest: the format and bundle schema
(:data:`BUNDLE_SCHEMA`), and for each run its row (every field by type and range: :mod:`.bundle_rows`), its
id against its kind and spec, what its summary claims (:mod:`stitchcore.store.claims`), its times and its
members' paths, sizes and sha256s.  Each zip entry is checked for a safe path (:func:`member_problem`), a regular file,
no encryption, a bounded compression (:data:`BOUNDED_COMPRESSION`) and a sane ratio under :class:`Limits`
(zip bombs); members are streamed and hashed, never read past their declared size; a run's ``series.json`` is
parsed with ``NaN``, ``Infinity`` and numbers beyond a float refused.  :mod:`.bundle_import` builds on these;
:mod:`.bundle_export` writes the layout (:data:`MANIFEST`, :data:`BUNDLE_SCHEMA`) they read.

>>> member_problem("runs/ab12/blobs/model.safetensors") is None
True
>>> member_problem("../../etc/passwd")
"member path '../../etc/passwd' escapes the store"
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from stitchcore.errors import StoreError
from stitchcore.store.bundle_rows import (
    _ID_RE,
    MAX_STEP,
    MAX_WORD,
    _is_number,
    _row_problem,
    _show,
    _time_problem,
)
from stitchcore.store.canonical_json import plain_json
from stitchcore.store.claims import contradiction
from stitchcore.store.results import run_id_for

__all__ = ["BOUNDED_COMPRESSION", "BUNDLE_SCHEMA", "MANIFEST", "Limits", "member_problem", "read_manifest"]

BUNDLE_SCHEMA: int = 1  # layout of the zip and its manifest; bump on an incompatible change
MANIFEST = "manifest.json"
_SHA_RE = re.compile(r"[0-9a-f]{64}")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # an artifact name: one path part, as the store allows


@dataclass(frozen=True)
class Limits:
    """Caps that keep a hostile zip from filling the disk or memory (zip bombs)."""

    total_bytes: int = 8 << 30  # every member together, uncompressed
    manifest_bytes: int = 16 << 20  # the manifest itself
    series_bytes: int = 256 << 20  # one run's series.json (parsed in memory)
    ratio: float = 200.0  # uncompressed / compressed, for members above ratio_floor
    ratio_floor: int = 1 << 20  # small members may compress well (JSON) without being bombs



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

