"""A job worker process: experiments run outside the process that serves the pages.

Training holds a CPU core (or several) for minutes; in the web server's own process it competes with
the threads that answer browsers.  :class:`WorkerProcess` is the parent's handle on one long-lived child
(start method ``spawn``, safe with CUDA) that runs one job at a time through
:func:`~stitchcore.experiments.run_experiment` on its own :class:`Store` of the same folder, with a
deliberate torch thread count.  What crosses the pipe:

parent -> child
    ``("run", kind, spec, rerun, device, options)``, ``("cancel",)``, ``("stop",)``, ``("ray-stop",)``
    (between jobs: stop the Ray the child started, if any)
child -> parent
    ``("batch", [("progress", fraction, message) | ("points", step, {name: value}), ...])`` at most
    every BATCH_SECONDS (a job logging hundreds of points a second costs the server a few messages),
    then ``("ray", up)`` (whether the child now holds a Ray it started on this machine) and one of
    ``("done", summary, cached, seconds)``, ``("cancelled", message)``, ``("failed", message)``;
    ``("ray-stopped", was_up)`` answers ``("ray-stop",)``

The child keeps its model caches between jobs; one that dies (killed, out of memory) is noticed as the
pipe closing, its job fails with the exit code, and the next job starts a fresh child.  The child
ignores SIGINT: Ctrl-C on the server's terminal stops the server, which stops its worker.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing as mp
import queue
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from stitchcore.backends import local_ray_up, stop_local_ray
from stitchcore.store.canonical_json import write_atomic
from stitchcore.store.results import Store

__all__ = ["THREADS_ENV", "MetricTap", "WorkerDied", "WorkerProcess", "configured_threads", "job_threads", "one_line"]

log = logging.getLogger(__name__)

THREADS_ENV = "STITCHLAB_JOB_THREADS"  # torch threads per job, when not given
BATCH_SECONDS = 0.2  # the child sends its progress and points at most this often
DEFAULT_STARTUP_SECONDS = 12.0  # a child's start-up (spawn, imports) before one is measured: 12-14 s seen, 2 cores
STARTUP_FILE = "worker_startup.json"  # in the store folder: the last start-up measured on this machine
OnProgress = Callable[[float, str], None]
OnPoints = Callable[[int, dict[str, float]], None]


INTERRUPTED = "interrupted: the server that ran it stopped (run it again to resume or redo it)"


class WorkerDied(RuntimeError):
    """The child process ended while it ran a job (killed, out of memory, a crash in native code)."""


def job_threads(workers: int = 1, cpu_count: int | None = None) -> int:
    """torch threads per job: the cores less one (left for the server), shared by ``workers`` jobs; at least 1.

    >>> job_threads(1, cpu_count=2), job_threads(1, cpu_count=16), job_threads(2, cpu_count=16), job_threads(4, 1)
    (1, 15, 7, 1)
    """
    import os

    cores = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    return max(1, (cores - 1) // max(1, workers))


def configured_threads(workers: int = 1) -> int:
    """torch threads per job: ``$STITCHLAB_JOB_THREADS`` when set, else :func:`job_threads`.

    Raises :class:`StitchError` naming the variable when it is not a whole number of at least 1.
    """
    import os

    from stitchcore.errors import StitchError

    text = os.environ.get(THREADS_ENV, "").strip()
    if not text:
        return job_threads(workers)
    if not text.isdigit() or int(text) < 1:
        raise StitchError(f"${THREADS_ENV} must be a whole number of threads (1 or more), not {text!r}")
    return int(text)


_SPAWN_LOCK = threading.Lock()


@contextlib.contextmanager
def _script_main_hidden() -> Iterator[None]:
    """Spawn without the page's script: Streamlit runs a page with its script as ``__main__`` (a module with a
    ``__file__`` and no ``__spec__``), and a spawned child runs its parent's ``__main__`` file before anything
    else, so a worker started from a page ran the whole app again, in bare mode, before it was ready.  While
    the child is started, ``__main__`` is a blank module; afterwards the script's is put back unless Streamlit
    has set another one meanwhile."""
    main = sys.modules.get("__main__")
    if main is None or getattr(main, "__spec__", None) is not None or not getattr(main, "__file__", None):
        yield  # python -m ... (the child imports the module by name) or no file: nothing is run twice
        return
    with _SPAWN_LOCK:
        blank = types.ModuleType("__main__")
        sys.modules["__main__"] = blank
        try:
            yield
        finally:
            if sys.modules.get("__main__") is blank:
                sys.modules["__main__"] = main


class WorkerProcess:
    """Parent side of one worker child (started on first use, restarted after it dies).

    ``run`` blocks the calling thread (the runner's queue thread) until the job ends and returns
    ``("done", summary, cached, seconds)``, ``("cancelled", message)`` or ``("failed", message)``;
    ``cancel`` may be called from any thread.
    """

    expected_startup: float = DEFAULT_STARTUP_SECONDS  # the last start-up measured in this process

    def __init__(self, store_root: str, threads: int, name: str = "stitchlab-worker") -> None:
        self.store_root = str(store_root)
        self.threads = int(threads)
        self.name = name
        self._proc: mp.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self._ready: Any = None  # an mp.Event the child sets once it has imported what jobs need
        self._started_at = 0.0
        self._send_lock = threading.Lock()
        self._use = threading.Lock()  # held while the pipe waits on an answer: a job, or a Ray stop
        self.ray_up = False  # the child holds a Ray it started on this machine (as it said after its last job)

    @property
    def pid(self) -> int | None:
        """The child's process id while it is alive."""
        return self._proc.pid if self._proc is not None and self._proc.is_alive() else None

    def start(self) -> None:
        """Start the child now (it imports torch and every experiment kind: seconds), so the first job does
        not wait for that; the job runner calls this when it starts."""
        self._start()

    def startup_left(self) -> float:
        """Seconds until the child can begin a job: 0 once it is warm, else what is left of the last start-up
        measured (``expected_startup``; a child not started yet takes all of it)."""
        ready = self._ready
        if self._proc is None or not self._proc.is_alive() or ready is None:
            return WorkerProcess.expected_startup
        elapsed = time.monotonic() - self._started_at
        if ready.is_set():
            return 0.0
        return max(1.0, WorkerProcess.expected_startup - elapsed)

    def _start(self) -> Connection:
        if self._proc is not None and self._proc.is_alive() and self._conn is not None:
            return self._conn
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        self._ready = ctx.Event()
        proc = ctx.Process(target=worker_main, args=(child, self.store_root, self.threads, self._ready),
                           name=self.name, daemon=True)
        self._started_at = time.monotonic()
        with _script_main_hidden():
            proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        threading.Thread(target=self._time_startup, args=(self._ready, self._started_at), daemon=True,
                         name=f"{self.name}-startup").start()
        log.info("job worker process %s started (pid %s, %d torch thread(s))", self.name, proc.pid, self.threads)
        return parent

    def _time_startup(self, ready: Any, started_at: float) -> None:
        """Measure this child's start-up (spawn to warm) for the next estimates, here and in later servers."""
        if ready.wait(timeout=600):
            seconds = time.monotonic() - started_at
            WorkerProcess.expected_startup = seconds
            log.info("job worker process %s warm after %.1f s", self.name, seconds)
            try:
                write_atomic(Path(self.store_root) / STARTUP_FILE, json.dumps({"seconds": round(seconds, 2)}))
            except OSError as exc:  # a read-only store: the next server guesses again
                log.info("could not save the worker's start-up time: %s", exc)

    @staticmethod
    def remembered_startup(store_root: str) -> float | None:
        """The start-up a worker of an earlier server on this store measured, if any."""
        try:
            seconds = float(json.loads((Path(store_root) / STARTUP_FILE).read_text())["seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return seconds if 0 < seconds < 600 else None

    def _send(self, message: tuple) -> None:
        conn = self._conn
        if conn is None:
            return
        with self._send_lock:
            try:
                conn.send(message)
            except (OSError, ValueError):  # the child is gone; run() notices
                pass

    def run(self, kind: str, spec: Any, *, rerun: bool, device: str, on_progress: OnProgress,
            on_points: OnPoints, options: dict | None = None) -> tuple:
        """Run one job in the child; raises :class:`WorkerDied` when the child ends first.

        ``options``: the job's RunOptions as a dict (None: local); the child stays connected to a Ray
        cluster between jobs (a Ray it started stays up until :meth:`stop_ray`)."""
        with self._use:
            conn = self._start()
            self._send(("run", kind, spec, rerun, device, options))
            while True:
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    proc = self._proc
                    if proc is not None:
                        proc.join(5)
                    code = proc.exitcode if proc is not None else None
                    self._proc, self._conn, self.ray_up = None, None, False
                    raise WorkerDied(f"the worker process died (exit code {code}) while it ran the job:"
                                     " out of memory or killed; run it again") from None
                if message[0] == "ray":
                    self.ray_up = bool(message[1])
                    continue
                if message[0] != "batch":
                    return message
                for item in message[1]:
                    if item[0] == "progress":
                        on_progress(item[1], item[2])
                    else:
                        on_points(item[1], item[2])

    def stop_ray(self, timeout: float = 60.0) -> bool | None:
        """Stop the Ray the child started on this machine, between jobs; True if one was up, None while the
        child runs a job (nothing is stopped: try again once it has ended)."""
        if not self._use.acquire(blocking=False):
            return None
        try:
            conn = self._conn
            if conn is None or self._proc is None or not self._proc.is_alive():
                self.ray_up = False
                return False
            self._send(("ray-stop",))
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0 and conn.poll(left):
                message = conn.recv()
                if message[0] == "ray-stopped":
                    self.ray_up = False
                    return bool(message[1])
            log.warning("worker %s: no answer to ray-stop within %.0f s", self.name, timeout)
            return False
        except (EOFError, OSError):  # the child is gone, and its Ray with it
            self.ray_up = False
            return False
        finally:
            self._use.release()

    def cancel(self) -> None:
        """Ask the running job to stop at its next step."""
        self._send(("cancel",))

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the child (after its current job's cancel, when one runs); kill it if it does not go."""
        proc = self._proc
        if proc is None:
            return
        self._send(("cancel",))
        self._send(("stop",))
        if self._ready is not None and not self._ready.is_set():
            timeout = 0.5  # still importing: no job to let finish
        proc.join(timeout)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        if self._conn is not None:
            self._conn.close()
        self._proc, self._conn, self.ray_up = None, None, False


class MetricTap:
    """The store as a running experiment sees it: ``log_metrics`` also feeds the job's live history.

    ``RunContext.log`` persists each point through ``store.log_metrics`` before it
    calls the progress callback, whose signature has no step; tapping the store
    keeps the live curve point for point equal to ``store.series(run_id)``.
    """

    def __init__(self, store: Store, run_id: str, on_points: Callable[[int, dict[str, float]], None]) -> None:
        self._store = store
        self._run_id = run_id
        self._on_points = on_points

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def log_metrics(self, run_id: str, step: int, metrics: dict[str, float], epoch: int | None = None) -> None:
        self._store.log_metrics(run_id, step, metrics, epoch=epoch)
        if run_id == self._run_id:
            self._on_points(int(step), metrics)


def one_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped ('' if none).

    >>> one_line("\\n  boom: bad value\\n  traceback ...")
    'boom: bad value'
    """
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else ""


# ---------------------------------------------------------------------------------------- child side


def worker_main(conn: Connection, store_root: str, threads: int, ready: Any = None) -> None:
    """The child: set threads, open the store, import what jobs need and set ``ready`` (an mp.Event), then run
    jobs from the pipe one at a time until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server's Ctrl-C: the parent stops us
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s [worker]: %(message)s")
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set (cannot happen in a fresh spawn child, but never fatal)
        pass
    store = Store(store_root)
    jobs: queue.Queue[tuple | None] = queue.Queue()
    cancel = threading.Event()
    send_lock = threading.Lock()

    def send(message: tuple) -> None:
        with send_lock:
            conn.send(message)

    def send_in_run(message: tuple) -> None:
        """A running job's progress: a pipe that broke means the parent is gone, so the run stops as interrupted
        (as the listener would say a moment later), never failed by a BrokenPipeError in its progress callback."""
        try:
            send(message)
        except (OSError, ValueError):
            cancel.reason, cancel.status = INTERRUPTED, "interrupted"  # type: ignore[attr-defined]
            cancel.set()

    def listen() -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                jobs.put(None)  # the parent is gone: the run is interrupted, not cancelled by anyone
                cancel.reason, cancel.status = INTERRUPTED, "interrupted"  # type: ignore[attr-defined]
                cancel.set()
                return
            if message[0] == "cancel":
                cancel.reason, cancel.status = "cancelled by the user", "cancelled"  # type: ignore[attr-defined]
                cancel.set()
            elif message[0] == "stop":
                jobs.put(None)
                return
            else:
                jobs.put(message)

    threading.Thread(target=listen, name="stitchlab-worker-pipe", daemon=True).start()
    _warm_up()
    if ready is not None:
        ready.set()
    while (job := jobs.get()) is not None:
        cancel.clear()
        try:
            if job[0] == "ray-stop":
                send(("ray-stopped", stop_local_ray()))
                continue
            result = _run_one(store, job, cancel, send_in_run)
            send(("ray", local_ray_up()))
            send(result)
            _release_device_memory()
        except (OSError, ValueError, BrokenPipeError):
            break  # the parent is gone
    store.close()


def _release_device_memory() -> None:
    """Between jobs: free what the last job left and hand the GPU's cached blocks back to the driver, so the
    worker holds its CUDA context (~0.5 GB) and no more while it waits (other processes may want the GPU)."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _warm_up() -> None:
    """Import torch, every experiment kind and the model sources (seconds), so a job does not pay for them; an
    import that fails here fails later in the job that needs it, with its own message."""
    import importlib

    for name in ("stitchcore.experiments", "stitchcore.models.sources"):  # timm, torchvision: when a job asks
        try:
            importlib.import_module(name)
        except Exception:
            log.warning("warming up: importing %s failed", name, exc_info=True)


def _run_one(store: Any, job: tuple, cancel: threading.Event, send: Callable[[tuple], None]) -> tuple:
    from stitchcore.backends import RunOptions
    from stitchcore.errors import Cancelled, StitchError
    from stitchcore.experiments import run_experiment
    from stitchcore.store.records import run_id_for

    _, kind, spec, rerun, device, options = job
    run_id = run_id_for(kind, spec.to_dict())
    pending: list[tuple] = []
    last = [time.monotonic()]

    def queue_item(item: tuple) -> None:
        pending.append(item)
        if time.monotonic() - last[0] >= BATCH_SECONDS:
            flush()

    def flush() -> None:
        if pending:
            send(("batch", list(pending)))
            pending.clear()
        last[0] = time.monotonic()

    tap = MetricTap(store, run_id, lambda step, metrics: queue_item(("points", step, dict(metrics))))
    try:
        try:
            out = run_experiment(kind, spec, tap, rerun=rerun, cancel=cancel, device=device, check=False,
                                 options=RunOptions.from_dict(options) if options else None,
                                 progress=lambda fraction, message, metrics: queue_item(("progress", fraction, message)))
        finally:
            flush()
    except Cancelled as exc:
        return ("cancelled", one_line(str(exc)) or "cancelled")
    except StitchError as exc:
        return ("failed", one_line(str(exc)) or type(exc).__name__)
    except Exception as exc:
        log.exception("job %s (%s) failed", run_id, kind)
        return ("failed", one_line(f"{type(exc).__name__}: {exc}"))
    return ("done", dict(out.record.summary), out.cached, out.seconds)
