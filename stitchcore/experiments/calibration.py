"""Background calibration: the calibration cache and how its timings are scheduled.

A calibration is a kind's unit costs on this machine (timed by :mod:`stitchcore.experiments.timing`'s helpers),
cached once per process and key (:func:`calibrated`).  An estimate asked with ``wait=True`` times a missing one
at once; a page asks with ``wait=False`` and never waits: the calibration is queued on two background lanes
(:class:`_Lane`, the newest request first), a *quick* one (the same code on a handful of examples, a small batch
scaled up: :func:`quick` is true inside it) and then the full one, which waits while a job runs
(:func:`yield_to`) and gives way at its next timed section when one starts (:class:`_Deferred`).  Meanwhile
the quick value is handed out, and the estimate made from it is marked provisional.

The context an estimate is asked in (wait or not, the job's torch thread count, which quick values went into
it) is held in context variables here, set by :mod:`stitchcore.experiments.estimate`; the timing helpers read
whether they run quick (:func:`quick`) or in full.  This module imports no kind and nothing above it.
"""

from __future__ import annotations

import atexit
import contextvars
import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

import torch

from stitchcore.errors import StitchError

__all__ = ["QUICK_GRACE_SECONDS", "calibrated", "calibrating", "calibrations", "clear_calibrations", "quick",
           "where", "yield_to"]

log = logging.getLogger(__name__)

_CACHE: dict[Hashable, Any] = {}  # full calibrations
_QUICK_CACHE: dict[Hashable, Any] = {}  # quick ones (a handful of examples), until the full one is in
_ASKED: dict[Hashable, float] = {}  # when a page first asked for a calibration (monotonic seconds)
QUICK_GRACE_SECONDS = 1.5  # a quick figure is given only once the full one has been awaited this long
_LOCK = threading.Lock()  # guards the tables below (held briefly, never while timing)
_MEASURING = threading.Lock()  # one full calibration at a time: two timed at once would slow each other down
_FAILED: dict[Hashable, tuple[float, BaseException]] = {}  # background calibrations that failed, and when
_RETRY_SECONDS = 60.0  # a failed background calibration is tried again after this long (a model may appear)
_NO_WAIT = contextvars.ContextVar("stitchlab_estimate_no_wait", default=False)
_QUICK = contextvars.ContextVar("stitchlab_estimate_quick", default=False)  # measure on a handful of examples
_IN_FULL: contextvars.ContextVar[list | None] = contextvars.ContextVar("stitchlab_estimate_in_full", default=None)
_USED_QUICK: contextvars.ContextVar[list | None] = contextvars.ContextVar("stitchlab_estimate_used_quick",
                                                                          default=None)
_THREADS: contextvars.ContextVar[int | None] = contextvars.ContextVar("stitchlab_estimate_threads", default=None)
# Inside full background timing: each timed section first checks that no job runs (else _Deferred), so a run
# launched meanwhile gets the CPU within one section, not after the whole calibration (12 s of a 27 s preset seen).
_DEFERS = contextvars.ContextVar("stitchlab_estimate_defers", default=False)
_DEFERRED: set[Hashable] = set()  # keys whose full timing waits for the jobs: not asked of the quick lane again


def _with_threads(measure: Callable[[], Any], threads: int | None) -> Any:
    """``measure()`` with this OS thread's torch intra-op threads at ``threads`` (the job runner's count;
    OpenMP keeps the count per thread), restored after."""
    before = torch.get_num_threads()
    if threads is not None and threads != before:
        torch.set_num_threads(threads)
    try:
        return measure()
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def where(device: torch.device) -> str:
    """The part of a calibration's key that says where it was timed: ``cpu x 2 threads``."""
    return f"{device} x {_THREADS.get() or torch.get_num_threads()} threads"


def quick() -> bool:
    """True inside a quick calibration: measure functions time a handful of examples (``QUICK_EXAMPLES``) and
    steps at a small batch (``QUICK_BATCH``), scaled to the spec (``pair_units``, ``per_step`` do this)."""
    return _QUICK.get()


class _Calibrating(Exception):
    """Raised inside an estimate made with ``wait=False`` whose calibration runs in the background."""


class _Deferred(Exception):
    """Raised by a timed section of full background timing while a job runs: timed again once none does."""


class _Lane:
    """A background thread that runs calibrations one after the other, the newest asked first (the page
    the user looks at now, not the pair they typed on the way to it); a key already asked is not queued twice."""

    def __init__(self, name: str, run: Callable[[Hashable, Callable[[], Any], int | None], None],
                 after: _Lane | None = None) -> None:
        self.name, self._run, self._after = name, run, after  # after: wait while that lane is busy
        self._todo: dict[Hashable, tuple[Callable[[], Any], int | None]] = {}
        self._thread: threading.Thread | None = None

    def ask(self, key: Hashable, measure: Callable[[], Any], threads: int | None) -> None:
        """Queue ``key`` (caller holds _LOCK)."""
        self._todo.pop(key, None)
        self._todo[key] = (measure, threads)  # last = newest
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, daemon=True, name=self.name)
            self._thread.start()

    def busy(self) -> bool:
        """Queued or running (caller holds _LOCK)."""
        return bool(self._todo) or (self._thread is not None and self._thread.is_alive())

    def busy_now(self) -> bool:
        """As :meth:`busy`, taking the lock."""
        with _LOCK:
            return self.busy()

    def _loop(self) -> None:
        while True:
            while self._after is not None and (self._after.busy_now() or _jobs_busy()):
                time.sleep(0.05)  # quick figures first, and full ones on a CPU no run is using
            with _LOCK:
                if not self._todo:
                    self._thread = None
                    return
                key = next(reversed(self._todo))
                measure, threads = self._todo.pop(key)
            self._run(key, measure, threads)

    def join(self, timeout: float) -> None:
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(timeout)


def calibrated(key: Hashable, measure: Callable[[], Any]) -> Any:
    """``measure()`` once per process and key (failures are not cached: a model may appear later).

    Under ``wait=False`` a missing calibration is queued for the background (quick, then full) and this
    returns the quick value when there is one (the estimate is then ``provisional``), else raises
    :class:`_Calibrating`; a recent background failure is raised again.
    """
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    if not _NO_WAIT.get():
        with _MEASURING:
            with _LOCK:
                if key in _CACHE:
                    return _CACHE[key]
            value = _with_threads(measure, _THREADS.get())
            with _LOCK:
                return _CACHE.setdefault(key, value)
    failed = _FAILED.get(key)
    if failed is not None and time.monotonic() - failed[0] < _RETRY_SECONDS:
        raise failed[1]
    threads = _THREADS.get()
    with _LOCK:
        asked = _ASKED.setdefault(key, time.monotonic())
        quick_value = _QUICK_CACHE.get(key, None)
        if quick_value is None and key not in _DEFERRED:
            _QUICK_LANE.ask(key, measure, threads)
        _FULL_LANE.ask(key, measure, threads)
    if quick_value is None or time.monotonic() - asked < QUICK_GRACE_SECONDS:
        raise _Calibrating(str(key))  # a small model's full timing is in before a first figure is needed
    used = _USED_QUICK.get()
    if used is not None:
        used.append(key)
    return quick_value


def _calibrate(key: Hashable, measure: Callable[[], Any], threads: int | None, *, is_quick: bool) -> None:
    """A background calibration: its result goes to the cache, a failure to _FAILED (logged)."""
    cache = _QUICK_CACHE if is_quick else _CACHE
    try:
        with _LOCK:
            if key in _CACHE or key in cache:
                return
        in_full: list[bool] = []
        if is_quick:  # short: not held back behind a full calibration (a first figure within seconds)
            token, full_token = _QUICK.set(True), _IN_FULL.set(in_full)
            try:
                value = _with_threads(measure, threads)
            finally:
                _QUICK.reset(token)
                _IN_FULL.reset(full_token)
            if in_full and all(in_full):  # small models: timed in full by the quick one; nothing left to refine
                cache, is_quick = _CACHE, False
        else:
            defers = _DEFERS.set(True)
            try:
                with _MEASURING:
                    value = _with_threads(measure, threads)
            finally:
                _DEFERS.reset(defers)
        with _LOCK:
            cache[key] = value
            if not is_quick:
                _QUICK_CACHE.pop(key, None)
                _ASKED.pop(key, None)
                _DEFERRED.discard(key)
        _FAILED.pop(key, None)
    except _Deferred:  # a job started: the full lane times it once the jobs are done
        with _LOCK:
            _DEFERRED.add(key)
            _FULL_LANE.ask(key, measure, threads)
    except StitchError as exc:  # a model or dataset that is not there (yet): say nothing for a while
        log.info("calibration %s failed: %s", key[0] if isinstance(key, tuple) else key, exc)
        _FAILED[key] = (time.monotonic(), exc)
    except Exception as exc:  # unexpected: logged with its traceback, tried again at the next ask
        log.warning("calibration %s failed", key[0] if isinstance(key, tuple) else key, exc_info=exc)
        _FAILED[key] = (time.monotonic() - _RETRY_SECONDS + 5.0, exc)


_BUSY_CHECKS: list[Callable[[], bool]] = []  # e.g. a job runner's "a job is running"


def yield_to(busy: Callable[[], bool]) -> Callable[[], None]:
    """Full background calibrations wait while ``busy()`` is true (a job runner passes "a job is running":
    timing beside a run would slow the run and skew the figure; quick ones still give a first figure).
    Returns the function that takes ``busy`` back."""
    with _LOCK:
        _BUSY_CHECKS.append(busy)

    def release() -> None:
        with _LOCK:
            if busy in _BUSY_CHECKS:
                _BUSY_CHECKS.remove(busy)
    return release


def _jobs_busy() -> bool:
    with _LOCK:
        checks = list(_BUSY_CHECKS)
    return any(check() for check in checks)


_QUICK_LANE = _Lane("stitchlab-estimate-quick", lambda k, m, t: _calibrate(k, m, t, is_quick=True))
_FULL_LANE = _Lane("stitchlab-estimate", lambda k, m, t: _calibrate(k, m, t, is_quick=False), after=_QUICK_LANE)


@atexit.register
def _finish_background() -> None:
    """Let background calibrations end before the interpreter does (torch aborts the process when a thread
    still inside an op is torn down at exit)."""
    with _LOCK:
        _QUICK_LANE._todo.clear()
        _FULL_LANE._todo.clear()
    _QUICK_LANE.join(timeout=60)
    _FULL_LANE.join(timeout=60)


def calibrating() -> bool:
    """True while a background calibration is queued or runs (an estimate asked with ``wait=False`` will come,
    or be refined)."""
    with _LOCK:
        return _QUICK_LANE.busy() or _FULL_LANE.busy()


def calibrations() -> int:
    """How many calibrations this process holds (tests check that the second estimate times nothing)."""
    with _LOCK:
        return len(_CACHE)


def clear_calibrations() -> None:
    """Forget every calibration: the next estimates time their steps again (the machine got busier)."""
    with _LOCK:
        _CACHE.clear()
        _QUICK_CACHE.clear()
        _ASKED.clear()
        _FAILED.clear()
        _DEFERRED.clear()


def _timed_in_full(measure: Callable[[], Any]) -> Any:
    """``measure()`` outside quick mode, inside a quick calibration: its result is the full one (kept as such)."""
    token, defers = _QUICK.set(False), _DEFERS.set(True)  # full timing: it waits for the jobs as the full lane's
    try:
        value = measure()
    finally:
        _QUICK.reset(token)
        _DEFERS.reset(defers)
    parts = _IN_FULL.get()
    if parts is not None:
        parts.append(True)
    return value
