"""The SQLite database under a store (private to :mod:`stitchcore.store`): one connection per thread, write
transactions, the read-only connection, and how a damaged or full database answers.

:class:`StoreConnections` is that part of :class:`~stitchcore.store.results.Store` (a base class); the tables
and their migrations are in :mod:`._schema`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from stitchcore.errors import StoreError
from stitchcore.store._schema import migrate
from stitchcore.store.disk import full_disk_message
from stitchcore.store.records import _ORIGIN_COLS, _RUN_COLS

__all__ = ["StoreConnections"]


class StoreConnections:
    """Mixin of :class:`~stitchcore.store.results.Store`: its SQLite connections (one per thread), write
    transactions and reads, safe to share between threads."""

    # set by Store.__init__
    root: Path
    db_path: Path
    read_only: bool
    stale: str | None
    full_disk: str | None
    _local: threading.local
    _conns: list[tuple[sqlite3.Connection, threading.RLock]]
    _conns_lock: threading.Lock
    _write_lock: threading.RLock
    _closed: bool
    _run_cols: str  # set by _migrate

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
