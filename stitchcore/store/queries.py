"""Every read of a store: runs (one, or a filtered list), metric series, artifacts checked against their
sha256, and the integrity check.

:class:`StoreQueries` is that part of :class:`~stitchcore.store.results.Store` (a base class, on its
connections); every write is the Store's own.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from stitchcore.errors import StoreError, shown
from stitchcore.store._connections import StoreConnections
from stitchcore.store.records import RunRecord, _record

__all__ = ["MAX_LIST", "StoreQueries"]

MAX_LIST = 1_000_000_000  # the most runs list_runs is asked for (limit): above any store, within SQLite's int64
_ART_COLS = "name, relpath, sha256, bytes"


def _sha_file(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


class StoreQueries(StoreConnections):
    """Mixin of :class:`~stitchcore.store.results.Store`: what it reads (runs, series, artifacts, integrity)."""

    # set by Store.__init__
    blobs: Path
    _verified: dict[Path, tuple[int, int]]

    def lookup(self, run_id: str) -> RunRecord | None:
        """The run with this id, whatever its status; None if unknown."""
        rows = self._query(f"SELECT {self._run_cols} FROM runs WHERE id = ?", (run_id,))
        return _record(rows[0]) if rows else None

    def lookup_done(self, run_id: str) -> RunRecord | None:
        """The run if it finished successfully (a cache hit), else None."""
        rec = self.lookup(run_id)
        return rec if rec is not None and rec.status == "done" else None

    def _get(self, run_id: str) -> RunRecord:
        rec = self.lookup(run_id)
        if rec is None:
            raise StoreError(f"unknown run id {run_id!r}: see `python -m stitchcore runs list`")
        return rec

    def list_runs(
        self, kind: str | None = None, status: str | Iterable[str] | None = None, limit: int | None = None
    ) -> list[RunRecord]:
        """Runs, newest first, optionally filtered by kind and status (one or several); at most ``limit``
        (None: all), a whole number 0 .. :data:`MAX_LIST` (SQLite's LIMIT is a 64-bit integer, and -1 there
        means no limit at all).

        >>> StoreQueries.list_runs(None, limit=10**30)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        stitchcore.errors.StoreError: limit must be a whole number 0 .. 1000000000 (got 1000...); leave it out for every run
        """
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIST):
            raise StoreError(f"limit must be a whole number 0 .. {MAX_LIST} (got {shown(limit, 24)}); leave it out "
                             "for every run")
        wanted = [] if status is None else [status] if isinstance(status, str) else list(status)
        sql = f"SELECT {self._run_cols} FROM runs WHERE (? IS NULL OR kind = ?)"
        sql += f" AND status IN ({', '.join('?' * len(wanted))})" if status is not None else ""
        sql += " ORDER BY created DESC, rowid DESC LIMIT ?"
        args = [kind, kind, *wanted, -1 if limit is None else int(limit)]
        return [_record(r) for r in self._query(sql, args)]

    def series(self, run_id: str, names: Iterable[str] | None = None) -> dict[str, list[tuple[int, float]]]:
        """``{name: [(step, value), ...]}`` ordered by step; NULL values come back as NaN."""
        sql, args = "SELECT name, step, value FROM series WHERE run = ?", [run_id]
        if names is not None:
            wanted = list(names)
            sql += f" AND name IN ({', '.join('?' * len(wanted))})"
            args.extend(wanted)
        out: dict[str, list[tuple[int, float]]] = {}
        for name, step, value in self._query(sql + " ORDER BY name, step", args):
            out.setdefault(name, []).append((step, math.nan if value is None else value))
        return out

    def artifacts(self, run_id: str) -> list[dict]:
        """``[{"name", "path", "sha256", "bytes"}, ...]`` sorted by name."""
        rows = self._query(f"SELECT {_ART_COLS} FROM artifacts WHERE run = ? ORDER BY name", (run_id,))
        return [{"name": n, "path": self.root / rel, "sha256": sha, "bytes": b} for n, rel, sha, b in rows]

    def artifact_path(self, run_id: str, name: str, *, verify: bool = True) -> Path:
        """Path of a recorded artifact; StoreError if unknown, missing, or (``verify``) not the bytes stored."""
        rows = self._query("SELECT relpath, sha256, bytes FROM artifacts WHERE run = ? AND name = ?", (run_id, name))
        if not rows:
            raise StoreError(f"run {run_id!r} has no artifact {name!r}: re-run it to produce one")
        path = self.root / rows[0][0]
        if not path.is_file():
            raise StoreError(f"artifact {name!r} of run {run_id} is missing at {path}: re-run the run")
        if verify:
            self._verify(run_id, name, path, rows[0][1], rows[0][2])
        return path

    def _verify(self, run_id: str, name: str, path: Path, sha: str, size: int) -> None:
        """StoreError unless ``path`` still has its recorded sha256 and size (hashed once per file change)."""
        stat = path.stat()
        stamp = (stat.st_mtime_ns, stat.st_size)
        if self._verified.get(path) == stamp:
            return
        if _sha_file(path) != (sha, size):
            raise StoreError(
                f"artifact {name!r} of run {run_id} does not match the sha256 recorded when it was stored"
                f" ({path} was changed or replaced): re-run run {run_id} (e.g. --rerun), or restore the file;"
                " `python -m stitchcore runs check` lists every such file"
            )
        self._verified[path] = stamp

    def integrity_check(self) -> list[str]:
        """Problems found (SQLite integrity, missing/tampered blobs, inconsistent rows); [] when fine."""
        try:
            problems = [f"sqlite: {r[0]}" for r in self._query("PRAGMA integrity_check") if r[0] != "ok"]
            problems += [f"sqlite foreign key: {r}" for r in self._query("PRAGMA foreign_key_check")]
        except (sqlite3.DatabaseError, StoreError) as exc:
            return [f"sqlite: {exc} (copy the store aside, then re-run or re-import)"]
        for rid, name, rel, sha, size in self._query(f"SELECT run, {_ART_COLS} FROM artifacts"):
            path = self.root / rel
            if not path.is_file():
                problems.append(f"run {rid}: artifact {name} missing ({path})")
                continue
            if _sha_file(path) != (sha, size):
                problems.append(f"run {rid}: artifact {name} does not match its recorded sha256/size")
        sql = "SELECT id FROM runs WHERE status = 'done' AND (summary IS NULL OR finished IS NULL)"
        problems += [f"run {rid}: done without summary or finish time" for (rid,) in self._query(sql)]
        known = {r[0] for r in self._query("SELECT id FROM runs")}
        for folder in sorted(self.blobs.iterdir()) if self.blobs.is_dir() else ():
            if folder.is_dir() and folder.name not in known:
                problems.append(f"blobs/{folder.name}: folder without a run (delete it or re-import)")
        return problems
