"""How a worker thread runs a job, the part of :class:`~stitchcore.jobs.runner.JobRunner` behind its queues
(private to :mod:`stitchcore.jobs`).

:class:`JobExecution` (a base class of the runner): the worker thread's loop (:meth:`~JobExecution._work`), one
job run in this thread or in the thread's worker process (:class:`~stitchcore.jobs.worker.WorkerProcess`), its
progress and metric points into the job, and a job's end: its final state, the store row, the listeners.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch

from stitchcore.errors import Cancelled, RunBusy, StitchError
from stitchcore.experiments import check_spec, run_experiment
from stitchcore.jobs._job import Listener, _Job
from stitchcore.jobs.snapshot import progress_phase
from stitchcore.jobs.worker import MetricTap, WorkerDied, WorkerProcess, one_line
from stitchcore.store.results import Store

__all__ = ["JobExecution"]

log = logging.getLogger(__name__)


class JobExecution:
    """Mixin of :class:`~stitchcore.jobs.runner.JobRunner`: what its worker threads do with the jobs they take
    off its queues, and how a job ends (also when it is cancelled before it starts)."""

    # set by JobRunner.__init__
    store: Store
    cpu_threads: int
    isolation: str
    _root: Path
    _warm: bool
    _lock: threading.Lock
    _cond: threading.Condition
    _listeners: list[Listener]
    _queues: dict[str, queue.Queue[_Job | None]]
    _workers: list[WorkerProcess]
    # from LocalRayKeeper, the runner's other base
    _noting_local_ray: Callable[[], AbstractContextManager[None]]
    _release_ray: Callable[[WorkerProcess | None], None]

    def _finish(self, job: _Job, state: str, error: str | None) -> None:
        """Move ``job`` to a final state (caller holds the lock) and wake waiters."""
        job.state, job.error, job.finished = state, error, time.time()
        job.message = state if error is None else error
        self._cond.notify_all()

    def _forget_queued_row(self, run_id: str) -> None:
        """Delete the placeholder row a deferred job wrote at submit, if it is still only queued."""
        try:
            rec = self.store.lookup(run_id)
            if rec is not None and rec.status == "queued":
                self.store.delete_run(run_id)
        except Exception:  # the job state is final anyway; never kill a worker over bookkeeping
            log.exception("job %s: could not remove its queued row", run_id)

    def _store_final(self, run_id: str, error: str, status: str) -> None:
        """Make sure the store row is not left queued/running after a failure outside the experiment."""
        try:
            rec = self.store.lookup(run_id)
            if rec is not None and rec.status in ("queued", "running"):
                self.store.fail(run_id, error, status=status)
        except RunBusy:
            pass  # another live process runs it: its row is its own
        except Exception:  # the job state is already final; never kill a worker over bookkeeping
            log.exception("job %s: could not record %s in the store", run_id, status)

    def _notify(self, job: _Job) -> None:
        with self._lock:
            listeners = list(self._listeners)
            snap = job.snapshot() if listeners else None
        for fn in listeners:
            try:
                fn(snap)
            except Exception:
                log.exception("job listener %r failed", fn)

    def _work(self, queue_name: str) -> None:
        worker = None
        if self.isolation == "process":
            worker = WorkerProcess(str(self._root), self.cpu_threads, name=f"stitchlab-worker-{queue_name}")
            with self._lock:
                self._workers.append(worker)
            if self._warm:
                worker.start()  # warm from the start: the first job does not wait for torch's imports
        else:
            torch.set_num_threads(self.cpu_threads)  # OpenMP keeps the count per OS thread
        q = self._queues[queue_name]
        try:
            while True:
                job = q.get()
                if job is None:
                    return
                try:
                    self._run(job, worker)
                except Exception:  # a bug in the runner itself; the worker keeps going
                    log.exception("job %s: runner error", job.id)
                self._release_ray(worker)
        finally:
            if worker is not None:
                worker.stop()

    def _done(self, job: _Job, summary: dict, cached: bool, seconds: float) -> None:
        history = self.store.series(job.id) if cached else None  # done meanwhile elsewhere
        with self._lock:
            job.summary, job.cached, job.progress = summary, cached, 1.0
            if history is not None:
                job.metrics = history
            self._finish(job, "done", None)
        log.info("job %s done in %.1f s", job.id, seconds)
        self._notify(job)

    def _run_in_worker(self, job: _Job, worker: WorkerProcess, on_progress: Callable[[float, str, dict], None],
                       on_points: Callable[[int, dict[str, float]], None]) -> tuple[str, str | None]:
        """Run ``job`` in the worker process; ("done", None) once recorded as done, else (state, error)."""
        with self._lock:
            job.stop_worker = worker.cancel
            stopped = job.cancel.is_set()
        if stopped:
            return "cancelled", "cancelled"
        try:
            result = worker.run(job.kind, job.spec, rerun=job.rerun, device=job.device,
                                on_progress=lambda fraction, message: on_progress(fraction, message, {}),
                                on_points=on_points, options=job.options.to_dict() if job.options else None)
        except WorkerDied as exc:
            log.error("job %s: %s", job.id, exc)
            return "failed", str(exc)
        finally:
            with self._lock:
                job.stop_worker = None
        if result[0] == "done":
            self._done(job, result[1], result[2], result[3])
            return "done", None
        return ("cancelled" if result[0] == "cancelled" else "failed"), result[1]

    def _run(self, job: _Job, worker: WorkerProcess | None = None) -> None:
        with self._lock:
            if job.state != "queued":
                return  # cancelled while queued
            stopped = job.cancel.is_set()
            if stopped:
                self._finish(job, "cancelled", "cancelled before it started")
            else:
                job.state, job.started, job.message = "running", time.time(), "starting"
        if stopped:
            self._store_final(job.id, "cancelled before it started", "cancelled")
            self._notify(job)
            return
        self._notify(job)

        def on_points(step: int, metrics: dict[str, float]) -> None:
            with self._lock:
                for name, value in metrics.items():
                    points = job.metrics.setdefault(str(name), [])
                    if points and points[-1][0] == step:
                        points[-1] = (step, float(value))  # the store replaces a repeated step too
                    else:
                        points.append((step, float(value)))
            self._notify(job)

        def on_progress(fraction: float, message: str, metrics: dict[str, float]) -> None:
            with self._lock:
                job.progress = fraction
                phase = progress_phase(message) if message else job.rate_phase
                if fraction > 0 and (job.rate_from is None or phase != job.rate_phase):
                    job.rate_from, job.rate_phase = (time.time(), fraction), phase  # a new phase: its own rate
                if message:
                    job.message = message
            self._notify(job)

        store: Any = MetricTap(self.store, job.id, on_points)  # stands in for the Store
        state, error = "failed", None
        if not job.checked:
            try:
                check_spec(job.kind, job.spec, self.store)
            except StitchError as exc:  # the spec cannot run: nothing of it stays in the store
                self._forget_queued_row(job.id)
                with self._lock:
                    self._finish(job, "failed", one_line(str(exc)) or type(exc).__name__)
                log.info("job %s refused: %s", job.id, exc)
                self._notify(job)
                return
        if worker is not None:
            state, error = self._run_in_worker(job, worker, on_progress, on_points)
            if state == "done":
                return
        else:
            outcome = None
            with self._noting_local_ray():  # a Ray this job starts here is this runner's to stop
                try:
                    outcome = run_experiment(
                        job.kind, job.spec, store, rerun=job.rerun, progress=on_progress, cancel=job.cancel,
                        device=job.device, check=False, options=job.options,
                    )
                except Cancelled as exc:
                    state, error = "cancelled", one_line(str(exc)) or "cancelled"
                except StitchError as exc:
                    error = one_line(str(exc)) or type(exc).__name__
                except Exception as exc:
                    error = one_line(f"{type(exc).__name__}: {exc}")
                    log.exception("job %s (%s) failed", job.id, job.label)
            if outcome is not None:
                self._done(job, dict(outcome.record.summary), outcome.cached, outcome.seconds)
                return
        self._store_final(job.id, error, state)
        with self._lock:
            self._finish(job, state, error)
        log.info("job %s %s: %s", job.id, state, error)
        self._notify(job)
