"""The results store's tables (runs, series, artifacts) and the migrations that build them, in order
(private to :mod:`stitchcore.store`)."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from stitchcore.errors import StoreError

__all__ = ["MIGRATIONS", "STATUSES", "migrate"]

log = logging.getLogger(__name__)

STATUSES = ("queued", "running", "done", "failed", "cancelled", "interrupted")

# Database migrations, applied in order; each entry's statements run in one
# transaction together with its row in schema_migrations.  Append, never edit.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: initial layout. JSON columns hold canonical JSON; series.value NULL stands for NaN.
        f"""CREATE TABLE runs (id TEXT PRIMARY KEY, kind TEXT NOT NULL, spec TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN {STATUSES!r}), summary TEXT, error TEXT,
            created REAL NOT NULL, started REAL, finished REAL, label TEXT NOT NULL DEFAULT '',
            owner TEXT)""",  # owner: 'host:pid' of the process that last wrote the status
        "CREATE INDEX runs_created ON runs (created)",
        "CREATE INDEX runs_kind_status ON runs (kind, status)",
        """CREATE TABLE series (run TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            name TEXT NOT NULL, step INTEGER NOT NULL, value REAL, epoch INTEGER,
            PRIMARY KEY (run, name, step)) WITHOUT ROWID""",
        """CREATE TABLE artifacts (run TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            name TEXT NOT NULL, relpath TEXT NOT NULL, sha256 TEXT NOT NULL, bytes INTEGER NOT NULL,
            created REAL NOT NULL, PRIMARY KEY (run, name))""",  # relpath: relative to the store root
    ),
    (  # 2: live ownership. heartbeat: time.time() of the owner's last stamp; cancel_requested: when another
        # process asked the owner to stop (`runs cancel`); both NULL on rows written before
        "ALTER TABLE runs ADD COLUMN heartbeat REAL",
        "ALTER TABLE runs ADD COLUMN cancel_requested REAL",
    ),
    (  # 3: where a row came from. imported: time.time() when this store imported it from a bundle,
        # imported_from: the bundle's file name; both NULL for runs computed here (and runs imported before)
        "ALTER TABLE runs ADD COLUMN imported REAL",
        "ALTER TABLE runs ADD COLUMN imported_from TEXT",
    ),
)


def migrate(
    query: Callable[[str], list[tuple]],
    tx: Callable[[], AbstractContextManager[sqlite3.Connection]],
    *,
    root: Path,
    db_path: Path,
    read_only: bool,
) -> None:
    """Bring the database at ``db_path`` up to the last of :data:`MIGRATIONS`; a read-only store is only
    checked to be one this code reads.  ``query`` and ``tx``: the Store's read and write transaction.

    StoreError for another program's database, or a version this code cannot write (or, read-only, read).
    """
    tables = {r[0] for r in query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if tables and "schema_migrations" not in tables:
        raise StoreError(
            f"{db_path} is another program's SQLite database (tables: {', '.join(sorted(tables)[:6])}),"
            " not a StitchLab store: pass another --store DIR"
        )
    if read_only:
        have = query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")[0][0] if tables else 0
        if not 1 <= have <= len(MIGRATIONS):  # older layouts read the same (later ones only add columns)
            raise StoreError(
                f"store {root} is read-only and has database version {have}, not one this StitchLab"
                f" reads (1 to {len(MIGRATIONS)}): open it once writable, or use a matching StitchLab"
            )
        return
    with tx() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                     "(version INTEGER PRIMARY KEY, applied REAL)")
        have = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]
        if have > len(MIGRATIONS):
            raise StoreError(
                f"store {root} has database version {have}, newer than this StitchLab"
                f" ({len(MIGRATIONS)}): upgrade StitchLab or pass another --store"
            )
        for version in range(have + 1, len(MIGRATIONS) + 1):
            for stmt in MIGRATIONS[version - 1]:
                conn.execute(stmt)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (version, time.time()))
            log.info("store %s: applied migration %d", root, version)
