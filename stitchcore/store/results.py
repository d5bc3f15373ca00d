"""Results store: ``stitchlab.sqlite`` (WAL; runs, series, artifacts) + ``blobs/<run_id>/<name>``.

The directory is ``--store DIR``, else ``$STITCHLAB_STORE``, else ``<repo>/cache``.
A run id hashes kind + canonical spec JSON + :data:`SCHEMA_VERSION`, so an
identical spec is a cache hit.  Every state change is one transaction and blobs
are written to a temp file then renamed: a crash leaves a run ``running``, which
:meth:`Store.mark_interrupted` turns ``interrupted`` at the next start.
The tables and their migrations are in :mod:`._schema`; who runs a run (owners, heartbeats,
cancelling from another process) is in :mod:`._ownership`.

>>> run_id_for("zoo", {"arch": "cnn", "seed": 0}) == run_id_for("zoo", {"seed": 0, "arch": "cnn"})
True
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from stitchcore.errors import RunBusy, StoreError, shown

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
from stitchcore.store._schema import MIGRATIONS, STATUSES, migrate  # noqa: F401
from stitchcore.store.canonical_json import canonical_json, plain_json
from stitchcore.store.disk import full_disk_message

__all__ = ["MAX_LIST", "SCHEMA_VERSION", "STATUSES", "RunRecord", "Store", "resolve_store_dir", "run_id_for"]

log = logging.getLogger(__name__)

# Version of what a stored result *means*; hashed into every run id, so bumping
# it makes old results cache misses (they stay listed).  Independent of the
# database layout, which evolves through _schema.MIGRATIONS without invalidating runs.
SCHEMA_VERSION: int = 1

DB_NAME = "stitchlab.sqlite"
ENV_VAR = "STITCHLAB_STORE"
MAX_LIST = 1_000_000_000  # the most runs list_runs is asked for (limit): above any store, within SQLite's int64
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # run ids and artifact names: one path part


def resolve_store_dir(explicit: str | Path | None = None) -> Path:
    """Store directory: ``explicit`` (``--store``) > ``$STITCHLAB_STORE`` > ``<repo>/cache``."""
    for choice in (explicit, os.environ.get(ENV_VAR, "").strip()):
        if choice is not None and str(choice) != "":
            return Path(choice).expanduser().resolve()
    return Path(__file__).resolve().parents[2] / "cache"


def run_id_for(kind: str, spec: dict) -> str:
    """First 16 hex chars of sha256 over canonical JSON of kind, spec and SCHEMA_VERSION."""
    plain_json(spec, "spec", lenient=False)
    text = canonical_json({"kind": kind, "spec": spec, "schema": SCHEMA_VERSION})
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


def _sha_file(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise StoreError(f"bad {what} {name!r}: use 1-128 of A-Z a-z 0-9 . _ - (no '/', '..', leading '.')")


def _writable(root: Path, db_path: Path) -> bool:
    """Whether this process can write the store: its folder (new blobs, WAL files) and its database."""
    return os.access(root, os.W_OK) and os.access(db_path, os.W_OK)


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
_ART_COLS = "name, relpath, sha256, bytes"


def _record(row: tuple) -> RunRecord:
    rid, kind, spec, status, summary, *rest = row  # rest: error, created, started, finished, label, origin
    return RunRecord(rid, kind, json.loads(spec), status, json.loads(summary) if summary else {}, *rest)


class Store:
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

    def _conn(self) -> tuple[sqlite3.Connection, threading.RLock]:
        """This thread's connection and the lock held while it is used (``close`` takes it before closing)."""
        if self._closed:
            raise StoreError(f"store {self.root} is closed: open a new Store")
        entry = getattr(self._local, "entry", None)
        if entry is None:
            conn = None
            try:
                if self.read_only:
                    conn = self._read_only_connection()
                else:
                    conn = sqlite3.connect(self.db_path, 30, isolation_level=None, check_same_thread=False)
                    conn.execute("PRAGMA busy_timeout = 30000")
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: durable up to the last checkpoint
                conn.execute("PRAGMA foreign_keys = ON")
            except sqlite3.DatabaseError as exc:
                if conn is not None:
                    conn.close()
                full = None if self.read_only else full_disk_message(self.root, exc)
                if full is None:
                    raise StoreError(
                        f"{self.db_path} is not a usable database ({exc}): move it aside or pass another --store"
                    ) from exc
                self.full_disk = full  # reads go on through a read-only connection; writes say why they cannot
                conn = self._read_only_connection()
                conn.execute("PRAGMA foreign_keys = ON")
            entry = (conn, threading.RLock())
            self._local.entry = entry
            with self._conns_lock:
                self._conns.append(entry)
        return entry

    def _read_only_connection(self) -> sqlite3.Connection:
        """A connection that reads what a live writer elsewhere has committed (its ``-wal`` file) where SQLite can
        read that file and its index; else an immutable one (nothing to create on a read-only mount), and
        :attr:`stale` says that recent runs may be missing."""
        uri = self.db_path.resolve().as_uri()
        wal = self.db_path.with_name(self.db_path.name + "-wal")
        if wal.is_file() and wal.stat().st_size > 0:  # a writer's commits not yet checkpointed into the file
            conn = sqlite3.connect(f"{uri}?mode=ro", 30, isolation_level=None, check_same_thread=False, uri=True)
            try:
                conn.execute("PRAGMA busy_timeout = 30000")
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # reads the WAL index: fails here if not
                return conn
            except sqlite3.DatabaseError as exc:
                conn.close()
                self.stale = (f"store {self.root} is read-only and its writer's latest changes ({wal.name}) cannot "
                              f"be read here ({exc}): runs finished since its last checkpoint may be missing")  # fmt: skip
        return sqlite3.connect(f"{uri}?mode=ro&immutable=1", 30, isolation_level=None, check_same_thread=False,
                               uri=True)  # fmt: skip

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: takes the write lock up front, no upgrade deadlock)."""
        if self.read_only:
            raise StoreError(f"store {self.root} is read-only: results can be viewed, not written;"
                             " pass a writable --store DIR (or STITCHLAB_STORE) to run experiments")
        conn, in_use = self._conn()
        if self.full_disk:
            raise StoreError(self.full_disk)
        with self._write_lock, in_use:
            if self._closed:
                raise StoreError(f"store {self.root} is closed: open a new Store")
            try:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    yield conn
                except BaseException:  # Ctrl-C may land just after BEGIN returns: never leave it open
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                full = full_disk_message(self.root, exc)
                if full is not None:  # nothing was written: said in one line (it may work again once space frees)
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise StoreError(full) from None
                if type(exc) is not sqlite3.DatabaseError:  # locked, constraint ...: the caller's to handle
                    raise
                raise StoreError(self._damaged(exc)) from None

    def _query(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        conn, in_use = self._conn()
        try:
            with in_use:
                if self._closed:
                    raise StoreError(f"store {self.root} is closed: open a new Store")
                return conn.execute(sql, tuple(args)).fetchall()
        except sqlite3.DatabaseError as exc:
            if type(exc) is not sqlite3.DatabaseError:  # locked, constraint ...: the caller's to handle
                raise
            raise StoreError(self._damaged(exc)) from None

    def _damaged(self, exc: Exception) -> str:
        return (f"{self.db_path} is damaged ({exc}): restore a backup, or move it aside and pass another --store"
                " (the sqlite3 shell's .recover can salvage its rows)")

    def _migrate(self) -> None:
        self._conn()  # opening finds a full disk: then the store is read as it is, as a read-only one is
        migrate(self._query, self._tx, root=self.root, db_path=self.db_path,
                read_only=self.read_only or bool(self.full_disk))  # fmt: skip
        columns = {row[1] for row in self._query("PRAGMA table_info(runs)")}
        origin = _ORIGIN_COLS if "imported" in columns else "NULL, NULL"  # a read-only store of version < 3
        self._run_cols = f"{_RUN_COLS}, {origin}"  # what every read of a run row selects (RunRecord's fields)

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

    def _drop_thread_conn(self) -> None:
        """Close the calling thread's connection (a thread that ends takes its connection with it)."""
        entry = getattr(self._local, "entry", None)
        if entry is None:
            return
        self._local.entry = None
        with self._conns_lock:
            if entry in self._conns:
                self._conns.remove(entry)
        with entry[1]:
            entry[0].close()

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

    def list_runs(
        self, kind: str | None = None, status: str | Iterable[str] | None = None, limit: int | None = None
    ) -> list[RunRecord]:
        """Runs, newest first, optionally filtered by kind and status (one or several); at most ``limit``
        (None: all), a whole number 0 .. :data:`MAX_LIST` (SQLite's LIMIT is a 64-bit integer, and -1 there
        means no limit at all).

        >>> Store.list_runs(None, limit=10**30)  # doctest: +ELLIPSIS
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
