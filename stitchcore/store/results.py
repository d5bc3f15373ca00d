"""Results store: ``stitchlab.sqlite`` (WAL; runs, series, artifacts) + ``blobs/<run_id>/<name>``.

The directory is ``--store DIR``, else ``$STITCHLAB_STORE``, else ``<repo>/cache`` (installed:
``~/.cache/stitchlab``).
A run id hashes kind + canonical spec JSON + :data:`SCHEMA_VERSION`, so an
identical spec is a cache hit.  Every state change is one transaction and blobs
are written to a temp file then renamed: a crash leaves a run ``running``, which
:meth:`Store.mark_interrupted` turns ``interrupted`` at the next start.
The tables and their migrations are in :mod:`._schema`; who runs a run (owners, heartbeats,
cancelling from another process) is in :mod:`._ownership`.

This module holds :class:`Store`, the facade of every public store operation, and its writes.  Run ids
and the run record are in :mod:`.records`; the SQLite connections and transactions in
:mod:`._connections`, every read in :mod:`.queries` (the Store's base classes).  ``run_id_for``,
``RunRecord``, ``SCHEMA_VERSION``, ``resolve_store_dir`` and ``MAX_LIST`` stay importable from here.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Self

from stitchcore.errors import RunBusy, StoreError

# HEARTBEAT_SECONDS, STALE_SECONDS and MIGRATIONS lived here: they stay importable from this module (to read;
# a monkeypatch takes effect in _ownership / _schema, where they are used)
from stitchcore.store._ownership import (  # noqa: F401
    HEARTBEAT_SECONDS,
    STALE_SECONDS,
    OwnedRuns,
    live_owner,
    owner_alive,
)
from stitchcore.store._ownership import HOST as _HOST
from stitchcore.store._schema import MIGRATIONS, STATUSES  # noqa: F401
from stitchcore.store.canonical_json import canonical_json, plain_json

# run ids, the run record and the store directory moved to .records, MAX_LIST to .queries: importable from here
# (to read; a monkeypatch of SCHEMA_VERSION takes effect in .records, where run_id_for reads it)
from stitchcore.store.queries import MAX_LIST, StoreQueries, _sha_file
from stitchcore.store.records import (
    _ORIGIN_COLS,
    _RUN_COLS,
    DB_NAME,
    SCHEMA_VERSION,
    RunRecord,
    _record,
    resolve_store_dir,
    run_id_for,
)

__all__ = ["MAX_LIST", "SCHEMA_VERSION", "STATUSES", "RunRecord", "Store", "resolve_store_dir", "run_id_for"]

log = logging.getLogger(__name__)

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # run ids and artifact names: one path part


def _check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise StoreError(f"bad {what} {name!r}: use 1-128 of A-Z a-z 0-9 . _ - (no '/', '..', leading '.')")


def _writable(root: Path, db_path: Path) -> bool:
    """Whether this process can write the store: its folder (new blobs, WAL files) and its database."""
    return os.access(root, os.W_OK) and os.access(db_path, os.W_OK)


class Store(StoreQueries):
    """The results store; safe to share between threads (one connection per thread)."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root: Path = resolve_store_dir(root)
        self.blobs: Path = self.root / "blobs"
        self.db_path: Path = self.root / DB_NAME
        # A store whose files cannot be written (a class sharing results from a read-only mount) is
        # opened read-only: everything reads, every write raises StoreError saying so.
        self.read_only: bool = self.db_path.is_file() and not _writable(self.root, self.db_path)
        if not self.read_only:
            try:
                self.blobs.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create store {self.root} ({exc}): pass a writable --store DIR") from exc
        self._local = threading.local()
        self._conns: list[tuple[sqlite3.Connection, threading.RLock]] = []  # every thread's (connection, in-use lock)
        self._conns_lock = threading.Lock()
        self._write_lock = threading.RLock()  # serialise this process's writers before SQLite's lock
        self._owner = f"{_HOST}:{os.getpid()}"
        self._closed = False
        self._verified: dict[Path, tuple[int, int]] = {}  # blob -> (mtime_ns, size) whose sha256 matched
        self.stale: str | None = None  # read-only: why recent runs may be missing (a writer's unreadable WAL)
        self.full_disk: str | None = None  # the disk is full: reads work, every write raises this one line
        # queued/running rows this process owns, what to call when another process asks one to stop, and
        # the heartbeat thread that stamps them (close() stops it at once)
        self._ownership = OwnedRuns()
        try:
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise StoreError(self._damaged(exc)) from None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close every connection this Store opened (any thread); further calls raise StoreError.

        The heartbeat thread is stopped first (it may be inside a write on its own connection).
        """
        self._closed = True
        self._ownership.stop()
        with self._conns_lock:
            entries = list(self._conns)
            self._conns.clear()
        for conn, in_use in entries:  # a thread inside a query or transaction finishes it first
            with in_use:
                conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _upsert(self, run_id: str, kind: str, spec: dict, label: str, status: str, keep_done: bool = False
                ) -> RunRecord:
        _check_name(run_id, "run id")
        spec_text = canonical_json(plain_json(spec, "spec", lenient=False))
        now = time.time()
        with self._tx() as conn:
            row = conn.execute("SELECT status, created, owner, heartbeat FROM runs WHERE id = ?", (run_id,)).fetchone()
            if keep_done and row and row[0] == "done":
                row = conn.execute(f"SELECT {self._run_cols} FROM runs WHERE id = ?", (run_id,)).fetchone()
                return _record(row)
            if row and row[0] in ("queued", "running") and row[2] != self._owner:
                if owner_alive(row[2], row[3], now):
                    if row[0] == "running":  # a queued row is taken by whoever starts it (or queues it again)
                        raise RunBusy(run_id, row[2])
                else:  # its owner died or went silent: the row says so first, then it is taken over
                    conn.execute("UPDATE runs SET status = 'interrupted', finished = ?, error = ? WHERE id = ?",
                                 (now, f"process {row[2]} stopped while the run was {row[0]}: re-run it", run_id))
                    log.warning("run %s: process %s stopped while it was %s; taking it over", run_id, row[2], row[0])
            conn.execute("DELETE FROM series WHERE run = ?", (run_id,))  # a re-run starts clean
            conn.execute("DELETE FROM artifacts WHERE run = ?", (run_id,))
            conn.execute(
                "INSERT INTO runs (id, kind, spec, status, created, started, label, owner, heartbeat)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET kind = excluded.kind,"
                " spec = excluded.spec, status = excluded.status, summary = NULL, error = NULL,"
                " created = excluded.created, started = excluded.started, finished = NULL,"
                " label = COALESCE(NULLIF(excluded.label, ''), label), owner = excluded.owner,"
                " heartbeat = excluded.heartbeat, cancel_requested = NULL",
                (run_id, kind, spec_text, status, row[1] if row and row[0] == "queued" else now,
                 now if status == "running" else None, label, self._owner, now),
            )
        shutil.rmtree(self.blobs / run_id, ignore_errors=True)
        self._own(run_id)
        return self._get(run_id)

    # -- live ownership: heartbeat, waiting, cancelling from another process ----------------------------

    def _own(self, run_id: str, on_cancel: Callable[[], None] | None = None) -> None:
        self._ownership.own(self, run_id, on_cancel)

    def _disown(self, run_id: str) -> None:
        self._ownership.disown(run_id)

    def watch_cancel(self, run_id: str, on_cancel: Callable[[], None]) -> None:
        """Call ``on_cancel()`` (from the heartbeat thread) when another process asks this process's queued or
        running run to stop (:meth:`request_cancel`, the CLI's ``runs cancel``)."""
        self._own(run_id, on_cancel)

    def _beat_once(self) -> bool:
        """One heartbeat (:meth:`.OwnedRuns.beat_once`): stamp the owned rows, pass on cancel requests.

        Returns False (and forgets the heartbeat thread) when this Store owns nothing or is closed.
        """
        return self._ownership.beat_once(self)

    def live_owner(self, run_id: str) -> str | None:
        """'host:pid' of the other live process that has this run queued or running; None if none does."""
        if self.read_only:  # nothing runs into a read-only store (and a version-1 one has no heartbeats)
            return None
        return live_owner(self._query, run_id)

    def request_cancel(self, run_id: str) -> str:
        """Stop a queued or running run: ``"asked"`` when a live process owns it (it stops at its next step and
        stores ``cancelled``), ``"cancelled"`` when nobody runs it any more (the row is marked at once).

        Raises :class:`StoreError` for an unknown run or one already finished.
        """
        rec = self._get(run_id)
        if rec.status not in ("queued", "running"):
            raise StoreError(f"run {run_id} is {rec.status}, not queued or running: nothing to cancel")
        if self._ownership.cancel_here(run_id):  # this process runs it
            return "asked"
        if self.live_owner(run_id) is not None:
            with self._tx() as conn:
                conn.execute("UPDATE runs SET cancel_requested = ? WHERE id = ?", (time.time(), run_id))
            return "asked"
        self.set_status(run_id, "cancelled", f"cancelled with `runs cancel` (it was {rec.status}, no process ran it)")
        return "cancelled"

    def enqueue(self, run_id: str, kind: str, spec: dict, label: str = "") -> RunRecord:
        """Create (or reset) the run as ``queued``; :meth:`begin` later turns it ``running``."""
        return self._upsert(run_id, kind, spec, label, "queued")

    def begin(self, run_id: str, kind: str, spec: dict, label: str = "", *, keep_done: bool = False) -> RunRecord:
        """Upsert the run as ``running`` (started=now); a re-run drops its old series and artifacts.

        ``keep_done``: a run that is ``done`` by now (another process finished it since the caller looked)
        is returned as it is.  Raises :class:`RunBusy` while another live process runs it.
        """
        return self._upsert(run_id, kind, spec, label, "running", keep_done)

    def set_status(self, run_id: str, status: str, error: str | None = None) -> None:
        """Move a run to ``status``; use :meth:`finish` for ``done``."""
        if status not in STATUSES or status == "done":
            raise StoreError(f"bad status {status!r}: use one of {', '.join(STATUSES)} (done: call finish)")
        now = time.time()
        with self._tx() as conn:
            row = conn.execute("SELECT owner, heartbeat, status FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row and row[2] in ("queued", "running") and owner_alive(row[0], row[1], now):
                raise RunBusy(run_id, row[0])  # never write over another live process's run
            cur = conn.execute(
                "UPDATE runs SET status = ?, error = ?,"
                " started = CASE WHEN ? = 'running' THEN ? ELSE started END,"
                " finished = CASE WHEN ? IN ('queued', 'running') THEN NULL ELSE ? END,"
                " owner = ? WHERE id = ?",
                (status, error, status, now, status, now, self._owner, run_id),
            )
            if cur.rowcount == 0:
                raise StoreError(f"unknown run id {run_id!r}: call Store.begin first")
        if status not in ("queued", "running"):
            self._disown(run_id)

    def finish(self, run_id: str, summary: dict) -> RunRecord:
        """Mark the run done with its summary (NaN/inf become null), in one transaction."""
        text = canonical_json(plain_json(dict(summary), "summary", lenient=True))
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE runs SET status = 'done', summary = ?, error = NULL, finished = ? WHERE id = ?",
                (text, time.time(), run_id),
            )
            if cur.rowcount == 0:
                raise StoreError(f"unknown run id {run_id!r}: call Store.begin first")
        self._disown(run_id)
        return self._get(run_id)

    def fail(self, run_id: str, error: str, status: str = "failed") -> None:
        """Record a failed / cancelled / interrupted run with its one-line error."""
        if status not in ("failed", "cancelled", "interrupted"):
            raise StoreError(f"fail() status must be failed, cancelled or interrupted, not {status!r}")
        self.set_status(run_id, status, error)

    def partial_path(self, run_id: str) -> Path:
        """A run's resume file (finished parts of an unfinished run; survives a re-run's reset)."""
        _check_name(run_id, "run id")
        return self.root / "partial" / f"{run_id}.json"

    def delete_run(self, run_id: str) -> None:
        """Delete the run's rows (one transaction), then its blobs and resume file."""
        _check_name(run_id, "run id")
        with self._tx() as conn:
            deleted = conn.execute("DELETE FROM runs WHERE id = ?", (run_id,)).rowcount  # cascades
        self._disown(run_id)
        blob_dir = self.blobs / run_id
        partial = self.partial_path(run_id)
        if not deleted and not blob_dir.exists() and not partial.exists():
            raise StoreError(f"unknown run id {run_id!r}: see `python -m stitchcore runs list`")
        shutil.rmtree(blob_dir, ignore_errors=True)
        partial.unlink(missing_ok=True)

    def mark_interrupted(self, force: bool = False) -> int:
        """Turn ``running``/``queued`` runs ``interrupted`` (call at process start); returns the count.

        Runs of another live process (the app, when the CLI starts; a process on another machine that
        shares the store and stamps its heartbeat) are kept unless ``force``.
        """
        now = time.time()
        self._conn()  # opening it finds a full disk (then nothing can be written either)
        if self.read_only or self.full_disk:
            return 0  # nothing can be written; viewers see the rows as they are
        with self._tx() as conn:
            rows = conn.execute("SELECT id, status, owner, heartbeat FROM runs WHERE status IN ('running', 'queued')")
            ids = [(rid, st) for rid, st, owner, beat in rows.fetchall()
                   if force or not owner_alive(owner, beat, now)]
            for rid, st in ids:
                conn.execute(
                    "UPDATE runs SET status = 'interrupted', finished = ?, error = ? WHERE id = ?",
                    (now, f"the process stopped while the run was {st}: re-run it", rid),
                )
        if ids:
            log.warning("store %s: marked %d unfinished run(s) interrupted", self.root, len(ids))
        return len(ids)

    def log_metrics(
        self, run_id: str, step: int, metrics: dict[str, float], epoch: int | None = None
    ) -> None:
        """Append one point per metric at ``step`` (one small transaction; NaN is kept as NaN)."""
        if not metrics:
            return
        try:
            rows = [(run_id, str(name), int(step), float(value), epoch) for name, value in metrics.items()]
        except (TypeError, ValueError) as exc:
            raise StoreError(f"metrics for run {run_id} must map names to numbers ({exc})") from exc
        try:
            with self._tx() as conn:
                conn.executemany("INSERT OR REPLACE INTO series VALUES (?, ?, ?, ?, ?)", rows)
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"unknown run id {run_id!r}: call Store.begin before logging metrics") from exc

    def _blob_target(self, run_id: str, name: str) -> Path:
        _check_name(run_id, "run id")
        _check_name(name, "artifact name")
        if self.lookup(run_id) is None:
            raise StoreError(f"unknown run id {run_id!r}: call Store.begin before storing artifacts")
        folder = self.blobs / run_id
        folder.mkdir(parents=True, exist_ok=True)
        return folder / name

    def _record_artifact(self, run_id: str, name: str, dest: Path, sha: str, size: int) -> None:
        row = (run_id, name, dest.relative_to(self.root).as_posix(), sha, size, time.time())
        try:
            with self._tx() as conn:
                conn.execute("INSERT OR REPLACE INTO artifacts VALUES (?, ?, ?, ?, ?, ?)", row)
        except sqlite3.IntegrityError as exc:  # the run was deleted meanwhile
            raise StoreError(f"unknown run id {run_id!r}: call Store.begin before storing artifacts") from exc

    def put_artifact(self, run_id: str, name: str, data: bytes) -> Path:
        """Write ``blobs/<run_id>/<name>`` atomically (temp + rename) and record its sha256 and size."""
        dest = self._blob_target(run_id, name)
        tmp = dest.with_name(f".tmp-{uuid.uuid4().hex}-{name}")
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        self._record_artifact(run_id, name, dest, hashlib.sha256(data).hexdigest(), len(data))
        return dest

    def put_artifact_file(self, run_id: str, name: str, src_path: str | Path, move: bool = True) -> Path:
        """Bring a finished file in as an artifact atomically; ``move=False`` leaves ``src_path`` in place."""
        src = Path(src_path)
        if not src.is_file():
            raise StoreError(f"artifact source {src} is not a file: write it first")
        dest = self._blob_target(run_id, name)
        sha, size = _sha_file(src)
        tmp = dest.with_name(f".tmp-{uuid.uuid4().hex}-{name}")
        try:
            if move and src.stat().st_dev == dest.parent.stat().st_dev:
                os.replace(src, dest)  # same filesystem: the rename is atomic
            else:
                shutil.copyfile(src, tmp)
                with open(tmp, "rb+") as fh:
                    os.fsync(fh.fileno())
                os.replace(tmp, dest)
                if move:
                    src.unlink(missing_ok=True)
        finally:
            tmp.unlink(missing_ok=True)
        self._record_artifact(run_id, name, dest, sha, size)
        return dest

    def import_runs(
        self,
        runs: Sequence[tuple[RunRecord, dict[str, list[tuple[int, float]]], dict[str, tuple[Path, str, int]]]],
        source: str | None = None,
    ) -> None:
        """Write whole finished runs made elsewhere (a bundle): every row, series point and artifact in one
        transaction, or nothing.

        ``runs``: ``(record, series, {artifact name: (staged file, sha256, bytes)})``; a staged file (on this
        store's filesystem) must have that sha256 and size, and is moved into ``blobs/<id>/``.  Each row
        records when it was imported and ``source`` (the bundle's file name): ``RunRecord.imported``,
        ``imported_from``.  StoreError, nothing written, when a run id is already in the store or a run is
        unfinished.
        """
        for rec, _, arts in runs:
            _check_name(rec.id, "run id")
            if rec.status not in STATUSES or rec.status in ("queued", "running"):
                raise StoreError(f"run {rec.id} has status {rec.status!r}: only finished runs can be imported")
            for name, (src, sha, size) in arts.items():
                _check_name(name, "artifact name")
                if _sha_file(Path(src)) != (sha, size):
                    raise StoreError(f"artifact {name!r} of run {rec.id} does not match its sha256/size: not imported")
        if not runs:
            return
        moved: list[Path] = []
        try:
            with self._tx() as conn:
                ids = [rec.id for rec, _, _ in runs]
                have = conn.execute(f"SELECT id FROM runs WHERE id IN ({', '.join('?' * len(ids))})", ids).fetchall()
                now = time.time()
                if have:
                    raise StoreError(f"run {have[0][0]} is already in store {self.root}: nothing imported")
                for rec, series, arts in runs:
                    summary = rec.summary if rec.summary or rec.status == "done" else None
                    conn.execute(
                        f"INSERT INTO runs ({_RUN_COLS}, {_ORIGIN_COLS}, owner)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (rec.id, rec.kind, canonical_json(plain_json(rec.spec, "spec", lenient=False)), rec.status,
                         None if summary is None else canonical_json(plain_json(summary, "summary", lenient=True)),
                         rec.error, rec.created, rec.started, rec.finished, rec.label, now, source,
                         self._owner),
                    )
                    points = [(rec.id, str(name), int(step), None if math.isnan(v) else float(v), None)
                              for name, pts in series.items() for step, v in pts]
                    conn.executemany("INSERT INTO series VALUES (?, ?, ?, ?, ?)", points)
                    folder = self.blobs / rec.id
                    if arts:
                        shutil.rmtree(folder, ignore_errors=True)  # a folder without a row: left by a crash
                        folder.mkdir(parents=True)
                        moved.append(folder)
                    for name, (src, sha, size) in arts.items():
                        os.replace(src, folder / name)
                        conn.execute("INSERT INTO artifacts VALUES (?, ?, ?, ?, ?, ?)",
                                     (rec.id, name, (folder / name).relative_to(self.root).as_posix(), sha, size,
                                      time.time()))
        except BaseException:
            for folder in moved:
                shutil.rmtree(folder, ignore_errors=True)
            raise
