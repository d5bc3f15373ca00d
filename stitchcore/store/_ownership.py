"""Who runs a run, across processes: owners, heartbeats, cancel requests (private to :mod:`stitchcore.store`).

A queued or running row names its owner (``host:pid``), which stamps the row's heartbeat every
:data:`HEARTBEAT_SECONDS` from one thread (:class:`OwnedRuns`); an owner is live by :func:`owner_alive`.
Another process asks a live owner to stop by setting the row's ``cancel_requested``; the owner's next
heartbeat passes it on to the run's cancel callback.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "HEARTBEAT_SECONDS",
    "HOST",
    "STALE_SECONDS",
    "OwnedRuns",
    "OwningStore",
    "live_owner",
    "owner_alive",
]

log = logging.getLogger(__name__)

HOST: str = socket.gethostname()
# A process that owns queued or running rows stamps their heartbeat every HEARTBEAT_SECONDS; a row whose
# owner has not stamped it for STALE_SECONDS (or, on this host, whose process is gone) is taken over
HEARTBEAT_SECONDS = 2.0
STALE_SECONDS = 30.0


def owner_alive(owner: str | None, heartbeat: float | None, now: float) -> bool:
    """Whether ``owner`` ('host:pid') is a live process other than this one.

    On this host its pid must exist and its heartbeat (if it stamps one) be fresh; on another host only the
    heartbeat can tell, so a row of another machine without a fresh heartbeat is stale.

    >>> owner_alive(f"{HOST}:{os.getpid()}", time.time(), time.time())  # this process is not "another"
    False
    >>> owner_alive("elsewhere:1", 100.0, 110.0), owner_alive("elsewhere:1", 100.0, 100.0 + STALE_SECONDS)
    (True, False)
    """
    host, _, pid_text = (owner or "").rpartition(":")
    if not host or not pid_text.isdigit() or (host == HOST and int(pid_text) == os.getpid()):
        return False
    fresh = heartbeat is not None and now - heartbeat < STALE_SECONDS
    if host != HOST:
        return fresh
    try:
        os.kill(int(pid_text), 0)
    except PermissionError:
        pass  # alive, someone else's
    except OSError:
        return False
    return heartbeat is None or fresh  # rows of an older StitchLab carry no heartbeat: the pid decides


def live_owner(query: Callable[[str, Iterable[Any]], list[tuple]], run_id: str) -> str | None:
    """'host:pid' of the other live process that has this run queued or running; None if none does.

    ``query``: the Store's read (``Store._query``).
    """
    rows = query("SELECT status, owner, heartbeat FROM runs WHERE id = ?", (run_id,))
    if not rows or rows[0][0] not in ("queued", "running"):
        return None
    return rows[0][1] if owner_alive(rows[0][1], rows[0][2], time.time()) else None


class OwningStore(Protocol):
    """What the ownership machinery uses of a :class:`~stitchcore.store.results.Store` (not imported here:
    results imports this module)."""

    root: Path
    _owner: str  # 'host:pid' of this process, as written into the rows it owns
    _closed: bool

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def _beat_once(self) -> bool: ...

    def _drop_thread_conn(self) -> None: ...


def _heartbeat(ref: weakref.ref[OwningStore], wake: threading.Event) -> None:
    """The heartbeat thread: ``Store._beat_once`` every HEARTBEAT_SECONDS while the Store lives, owns rows and
    is open.  It holds the Store only during a beat, so a Store nobody uses any more is collected (and its
    rows go stale, as they should: nothing runs them)."""
    while True:
        store = ref()
        if store is None:
            return
        try:
            if not store._beat_once():
                store._drop_thread_conn()
                return
        finally:
            del store
        if wake.wait(HEARTBEAT_SECONDS):  # close() woke us: the next _beat_once returns False
            store = ref()
            if store is not None:
                store._drop_thread_conn()
            return


class OwnedRuns:
    """The queued/running rows one Store owns, each with what to call when another process asks it to stop,
    and the heartbeat thread that stamps them while there are any; safe to share between threads."""

    def __init__(self) -> None:
        self._owned: dict[str, Callable[[], None] | None] = {}  # run id -> cancel callback
        self._lock = threading.Lock()
        self._beat: threading.Thread | None = None  # stamps the owned rows' heartbeat while there are any
        self._wake = threading.Event()  # set by stop(): the heartbeat thread stops at once

    def own(self, store: OwningStore, run_id: str, on_cancel: Callable[[], None] | None = None) -> None:
        """Own ``run_id`` (``on_cancel``, when given, replaces its callback); start the heartbeat thread for
        ``store`` unless it runs or ``store`` is closed."""
        with self._lock:
            if on_cancel is not None or run_id not in self._owned:
                self._owned[run_id] = on_cancel
            if not store._closed and (self._beat is None or not self._beat.is_alive()):
                self._beat = threading.Thread(target=_heartbeat, args=(weakref.ref(store), self._wake),
                                              name="stitchlab-heartbeat", daemon=True)
                self._beat.start()

    def disown(self, run_id: str) -> None:
        with self._lock:
            self._owned.pop(run_id, None)

    def cancel_here(self, run_id: str) -> bool:
        """Whether this process owns the run; if so its cancel callback (if any) is called."""
        with self._lock:
            here = self._owned.get(run_id) if run_id in self._owned else False
        if here is False:
            return False
        if here is not None:
            here()
        return True

    def beat_once(self, store: OwningStore) -> bool:
        """One heartbeat: stamp the owned rows, drop those no longer ours, pass on cancel requests.

        Returns False (and forgets the heartbeat thread) when nothing is owned or ``store`` is closed.
        """
        with self._lock:
            ids = list(self._owned)
            if not ids or store._closed:
                self._beat = None
                return False
        fire: list[Callable[[], None]] = []
        try:
            marks = ", ".join("?" * len(ids))
            with store._tx() as conn:
                conn.execute(f"UPDATE runs SET heartbeat = ? WHERE owner = ? AND status IN ('queued', 'running')"
                             f" AND id IN ({marks})", (time.time(), store._owner, *ids))
                rows = conn.execute(
                    f"SELECT id, status, owner, cancel_requested FROM runs WHERE id IN ({marks})", ids
                ).fetchall()
            mine = {rid: asked for rid, status, owner, asked in rows
                    if owner == store._owner and status in ("queued", "running")}
            with self._lock:
                for rid in ids:
                    if rid not in mine:
                        self._owned.pop(rid, None)  # finished, deleted, or taken over
                    elif mine[rid] is not None and (fn := self._owned.get(rid)) is not None:
                        self._owned[rid] = None  # once
                        fire.append(fn)
        except Exception:  # a busy store: try again next beat
            log.debug("heartbeat of %s failed", store.root, exc_info=True)
        for fn in fire:
            try:
                fn()
            except Exception:
                log.exception("cancel callback failed")
        return True

    def stop(self) -> None:
        """Wake the heartbeat thread so it stops, and wait for it (unless this is that thread)."""
        self._wake.set()
        beat = self._beat
        if beat is not None and beat is not threading.current_thread():
            beat.join(timeout=30)
