"""Background jobs: one process-wide :class:`JobRunner` runs experiments off the UI thread.

The app holds one runner (``st.cache_resource``); pages :meth:`~JobRunner.submit`
a spec, then poll :meth:`~JobRunner.get` for a :class:`JobSnapshot` and redraw
the live curve.  Every job goes through :func:`stitchcore.experiments.run_experiment`,
so caching, store rows and metric series are the same as in the CLI; the store
row is written ``queued`` at submit time, so other sessions and processes see it.

Queues and threads
    One FIFO queue per device.  Each CUDA (or MPS) device has one worker thread:
    one job at a time per accelerator.  The ``cpu`` queue has ``cpu_workers``
    threads.  Workers are daemon threads and never touch Streamlit.

Where a job runs (``isolation``)
    ``"process"`` (the app): each worker thread drives a long-lived child process
    (:class:`~stitchcore.jobs.worker.WorkerProcess`, start method
    ``spawn``) that runs the job; progress, metric points and cancel cross a pipe,
    so training never holds the server's interpreter.  ``"thread"`` (the default,
    for scripts and tests): the worker thread runs the job itself.

Thread policy (``torch.set_num_threads``)
    Each job runs with ``cpu_threads`` intra-op threads: given, else
    ``$STITCHLAB_JOB_THREADS``, else the cores less one (left for the server)
    shared by ``cpu_workers`` (:func:`~stitchcore.jobs.worker.job_threads`, at least 1).  A worker process
    sets it for itself.  In thread mode the count is process-global, so it is set
    in the thread that builds the runner and at the start of each worker thread
    (an OpenMP build keeps the count per OS thread), and :meth:`JobRunner.shutdown`
    restores the previous value.

A Ray started on this machine (``RunOptions("ray")`` without an address)
    lives in the process that ran the job (the worker child, or this process in thread mode) and is
    kept for the next job while the setting uses it.  Once the setting no longer does
    (:meth:`JobRunner.set_options`), the runner stops it at once where no job runs on it, else as soon
    as the running job ends (:meth:`JobRunner.local_ray` says which; ``stop_local_ray(cancel_jobs=True)``
    stops the jobs on it first).  That bookkeeping is :mod:`.local_ray`.

One runner per store per process: a runner calls :meth:`Store.mark_interrupted`
when it starts (runs left ``running``/``queued`` by dead processes become
``interrupted``), which it skips while another live runner in this process
uses the same store (a Streamlit code reload can briefly hold two).

This module holds the queues and the public API.  What a worker thread does with a job it takes off a
queue is in :mod:`._execution`, a job's mutable state in :mod:`._job`; :class:`JobRunner` is built on
:class:`~._execution.JobExecution` and :class:`~.local_ray.LocalRayKeeper`.

Typical use (the CLI's ``--wait`` style)::

    runner = JobRunner(Store(), devices=["cpu"])
    job = runner.submit("zoo", ZooRecipe(seed=3))
    print(runner.wait(job.id).summary)
    runner.shutdown()
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from pathlib import Path
from typing import Any, Self

import torch

from stitchcore.backends import RunOptions, options_from_env
from stitchcore.backends.settings import save_options, saved_options
from stitchcore.device import pick_device
from stitchcore.errors import RunBusy, StitchError
from stitchcore.experiments import check_spec, get_experiment, spec_from_record
from stitchcore.experiments.estimate import yield_to
from stitchcore.experiments.zoo import zoo_name
from stitchcore.jobs._execution import JobExecution
from stitchcore.jobs._job import Listener, _Job, _label
from stitchcore.jobs.local_ray import LocalRayKeeper
from stitchcore.jobs.snapshot import FINAL_STATES, JobSnapshot
from stitchcore.jobs.worker import WorkerProcess, configured_threads
from stitchcore.models.refs import parse_ref
from stitchcore.store.records import run_id_for
from stitchcore.store.results import Store

__all__ = ["JobRunner"]

log = logging.getLogger(__name__)

STARTUP_PER_IMPORT_CPU = 1.25  # a worker's start-up (wall) per second of this process's import CPU time

KEEP_FINISHED = 200  # finished jobs kept in memory; older ones are read back from the store by get()

_live_roots: dict[Path, int] = {}  # store root -> live runners in this process using it
_live_roots_lock = threading.Lock()


def _norm_device(name: str) -> str:
    """Queue name of a device string: 'CUDA' -> 'cuda:0', 'cuda:1' stays, 'cpu' stays."""
    dev = pick_device(name)  # StitchError for unknown / unavailable devices
    if dev.type == "cuda":
        return f"cuda:{dev.index if dev.index is not None else 0}"
    return dev.type if dev.index is None else str(dev)


def _detect_devices() -> list[str]:
    found = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return [*found, "cpu"]


class JobRunner(JobExecution, LocalRayKeeper):
    """Process-wide job queues over one :class:`Store`: submit, poll, cancel, wait.

    ``devices``: the queues, in order of preference (default: every CUDA device,
    MPS if present, then ``cpu``); a job submitted without a device goes to the
    one ``pick_device()`` chooses (honours ``$STITCHLAB_DEVICE``) if it has a
    queue, else to ``devices[0]``.  ``cpu_workers``: CPU jobs run at once.
    ``cpu_threads``: torch intra-op threads per job; ``isolation``: ``"thread"`` or
    ``"process"`` (see the module docstring); ``warm``: start the worker processes now, so the first job
    does not wait for their start-up (``startup_seconds`` says how long that is).
    """

    def __init__(self, store: Store, *, devices: list[str] | None = None, cpu_workers: int = 1,
                 cpu_threads: int | None = None, isolation: str = "thread", options: RunOptions | None = None,
                 warm: bool = False) -> None:  # fmt: skip
        if cpu_workers < 1:
            raise StitchError(f"cpu_workers must be at least 1, not {cpu_workers}")
        if isolation not in ("thread", "process"):
            raise StitchError(f"isolation must be 'thread' or 'process', not {isolation!r}")
        if cpu_threads is None:
            cpu_threads = configured_threads(cpu_workers)  # StitchError for a bad $STITCHLAB_JOB_THREADS
        if cpu_threads < 1:
            raise StitchError(f"cpu_threads must be at least 1, not {cpu_threads}")
        names = list(dict.fromkeys(_norm_device(d) for d in (devices or _detect_devices())))  # [] = detect
        self.store = store
        self.devices: tuple[str, ...] = tuple(names)
        auto = _norm_device("auto")
        self.default_device: str = auto if auto in names else names[0]
        self.cpu_threads: int = cpu_threads
        self.isolation: str = isolation
        # where the units of matrices, assemblies and sweeps run: given, else saved from the Settings page,
        # else $STITCHLAB_BACKEND / $STITCHLAB_RAY_ADDRESS (local)
        self.options: RunOptions = options or saved_options(store.root) or options_from_env()
        self._workers: list[WorkerProcess] = []  # process mode: one per worker thread, started on first job
        self._warm = warm  # ... or at once (the app: its first job does not wait for the worker's imports)
        if isolation == "process":
            # measured by an earlier server on this store; else this process's own CPU time so far, which went
            # mostly into the imports a worker makes too (torch, the kinds): a guess that follows the machine
            seconds = WorkerProcess.remembered_startup(str(store.root))
            WorkerProcess.expected_startup = seconds if seconds is not None else min(30.0, max(
                2.0, STARTUP_PER_IMPORT_CPU * time.process_time()))
        self._ray_here = False  # thread mode: a job of this runner started a Ray in this process, still up
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._submit_lock = threading.Lock()  # one submit at a time: dedupe check + store row + queue
        self._jobs: dict[str, _Job] = {}
        self._seq = 0
        self._listeners: list[Listener] = []
        self._closed = False
        self._root = Path(store.root).resolve()

        with _live_roots_lock:
            shared = _live_roots.get(self._root, 0)
            _live_roots[self._root] = shared + 1
        if shared:
            log.warning("another JobRunner in this process uses %s: not marking its runs interrupted", self._root)
        else:
            store.mark_interrupted()

        self._prev_threads = torch.get_num_threads()
        if isolation == "thread":
            torch.set_num_threads(self.cpu_threads)
        self._queues: dict[str, queue.Queue[_Job | None]] = {name: queue.Queue() for name in names}
        self._threads: list[tuple[str, threading.Thread]] = []  # (queue name, worker)
        for name in names:
            for i in range(cpu_workers if name == "cpu" else 1):
                t = threading.Thread(target=self._work, args=(name,), name=f"stitchlab-job-{name}-{i}", daemon=True)
                t.start()
                self._threads.append((name, t))
        self._release_calibrations = yield_to(self._running)  # estimates' full timings wait for a quiet CPU
        log.info("job runner on %s: queues %s, %d CPU thread(s) per job, jobs in a %s", self._root,
                 ", ".join(names), self.cpu_threads, isolation)

    # -- public API -------------------------------------------------------------------------------

    def set_options(self, options: RunOptions, save: bool = True) -> None:
        """Where the next jobs' units run (jobs already queued keep theirs); ``save``: also for the next
        server on this store (``settings.json`` in the store directory)."""
        self.options = options
        if save:
            save_options(self.store.root, options)
        if not options.local_ray:
            self.stop_local_ray()  # where a job still runs on it, it stops when that job ends

    def options_for(self, kind: str) -> RunOptions | None:
        """The runner's options for a job of ``kind``; None (local) for kinds that run only here."""
        if self.options.backend in get_experiment(kind).backends:
            return self.options
        return None

    def submit(self, kind: str, spec: Any, *, rerun: bool = False, device: str | None = None) -> JobSnapshot:
        """Queue ``spec`` (a spec object with ``to_dict()``); returns at once.

        The job id is the run id, independent of the device: a job with the same
        id that is queued or running is returned as it is (also with ``rerun``),
        and a finished run in the store comes back ``done`` with ``cached=True``
        unless ``rerun``.  Raises :class:`StitchError` for an unknown kind or
        device, a run that another live process is running, or a spec its models or
        data cannot run (a bad cut name ...): checked here, before anything is stored,
        unless it names a zoo model still queued in this runner (then when it starts).
        """
        get_experiment(kind)  # StitchError naming the close kinds
        if not callable(getattr(spec, "to_dict", None)):
            raise TypeError(f"spec must be a spec object with to_dict(), not {type(spec).__name__}")
        spec_dict = spec.to_dict()
        run_id = run_id_for(kind, spec_dict)
        queue_name = self._queue_for(device)
        label = _label(kind, spec)
        waits: tuple[str, ...] = ()
        with self._lock:
            live = self._jobs.get(run_id)
            busy = live is not None and live.state in ("queued", "running")
        if not busy and (rerun or self.store.lookup_done(run_id) is None):
            waits = self._check_or_defer(kind, spec)  # outside the locks: it loads models
        with self._submit_lock:
            with self._lock:
                if self._closed:
                    raise StitchError("the job runner is shut down; start a new one")
                live = self._jobs.get(run_id)
                if live is not None and live.state in ("queued", "running"):
                    return live.snapshot()
            hit = None if rerun else self.store.lookup_done(run_id)
            now = time.time()
            job = _Job(run_id, kind, spec, label, queue_name, rerun, now, 0, waits_for=waits,
                       options=self.options_for(kind))
            if hit is not None:
                job.state, job.progress, job.message, job.cached = "done", 1.0, "cached", True
                job.summary, job.metrics = dict(hit.summary), self.store.series(run_id)
                job.started, job.finished = hit.started, hit.finished
                job.imported, job.imported_from = hit.imported, hit.imported_from
                job.device = str(hit.summary.get("device", queue_name))
            else:
                try:
                    self.store.enqueue(run_id, kind, spec_dict, label=label)  # other sessions see it queued
                    self.store.watch_cancel(run_id, lambda: self.cancel(run_id))  # `runs cancel` elsewhere
                except RunBusy as busy:  # another process runs it: the job waits for its result when it starts
                    job.message = f"queued; process {busy.owner} is running it"
            with self._lock:
                self._seq += 1
                job.seq = self._seq
                self._jobs[run_id] = job
                self._evict()
                snap = job.snapshot()
            if hit is None:
                self._queues[queue_name].put(job)
                log.info("job %s queued on %s: %s", run_id, queue_name, label)
        return snap

    def get(self, job_id: str) -> JobSnapshot | None:
        """The live job, else the run rebuilt from the store (state + series); None if unknown."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None:
                return job.snapshot()
        rec = self.store.lookup(job_id)
        if rec is None:
            return None
        done = rec.status == "done"
        try:
            spec = spec_from_record(rec)
        except StitchError:  # a kind this code does not register, or an old spec it cannot read
            spec = None
        return JobSnapshot(
            rec.id, rec.kind, rec.label or _label(rec.kind, None), rec.status, 1.0 if done else 0.0,
            rec.status, self.store.series(rec.id), rec.error, dict(rec.summary) if done else None, done,
            rec.created, rec.started, rec.finished, str(rec.summary.get("device", "")), spec,
            imported=rec.imported, imported_from=rec.imported_from,
        )

    @property
    def closed(self) -> bool:
        """True once :meth:`shutdown` has begun: nothing more is submitted."""
        return self._closed

    def startup_seconds(self) -> float:
        """Seconds before a job submitted now could begin: 0 in thread mode or with a warm worker process,
        else what is left of a worker's start-up (spawn and imports; measured, 12 s before it is)."""
        if self.isolation != "process":
            return 0.0
        with self._lock:
            workers = list(self._workers)
        if not workers:
            return WorkerProcess.expected_startup
        return min(w.startup_left() for w in workers)

    def cluster_warm(self) -> bool:
        """Whether a job has already run its units on a cluster (Ray) through this runner: its workers are up
        (the job worker stays connected between jobs), so the next one does not wait for them to start."""
        with self._lock:
            return any(j.state == "done" and j.options is not None and j.options.backend != "local"
                       for j in self._jobs.values())

    def ahead_of(self, job_id: str) -> list[JobSnapshot]:
        """What a queued job waits for, in run order: the jobs its spec's models come from (``waits_for``)
        and the jobs before it on its queue that are still queued or running; [] for any other job."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.state != "queued":
                return []
            before = [j for j in self._jobs.values() if j.seq < job.seq and j.state in ("queued", "running")
                      and (j.device == job.device or j.id in job.waits_for)]
            return [j.snapshot() for j in sorted(before, key=lambda j: j.seq)]

    def cancel(self, job_id: str) -> bool:
        """Ask a queued or running job to stop; False if it is unknown here or already final.

        A queued job is cancelled at once; a running one stops at its next step
        (the experiment checks the event), then reads ``cancelled``.
        """
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.state in FINAL_STATES:
                return False
            job.cancel.set()
            stop_worker = job.stop_worker
            was_queued = job.state == "queued"
            if was_queued:
                self._finish(job, "cancelled", "cancelled before it started")
        if stop_worker is not None:
            stop_worker()
        if was_queued:
            self._store_final(job_id, "cancelled before it started", "cancelled")
            self._notify(job)
        log.info("job %s: cancel requested", job_id)
        return True

    def list(self, active_only: bool = False) -> list[JobSnapshot]:
        """Jobs this runner knows (submitted or cached lookups), newest first."""
        with self._lock:
            jobs = sorted(self._jobs.values(), key=lambda j: j.seq, reverse=True)
            return [j.snapshot() for j in jobs if not active_only or j.state in ("queued", "running")]

    def wait(self, job_id: str, timeout: float | None = None) -> JobSnapshot:
        """Block until the job is final; TimeoutError after ``timeout`` seconds.

        An id this runner does not hold is answered from the store as it stands.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            job = self._jobs.get(job_id)
            while job is not None and job.state not in FINAL_STATES:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"job {job_id} is still {job.state} after {timeout} s")
                self._cond.wait(left)
            if job is not None:
                return job.snapshot()
        snap = self.get(job_id)
        if snap is None:
            raise StitchError(f"unknown job id {job_id!r}: see `python -m stitchcore runs list`")
        return snap

    def add_listener(self, fn: Listener) -> None:
        """Call ``fn(snapshot)`` after every change of any job, in the worker thread; keep it quick.

        For the CLI's progress lines and tests; pages poll :meth:`get` instead.
        Exceptions from ``fn`` are logged and ignored.
        """
        with self._lock:
            self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        with self._lock:
            if fn in self._listeners:
                self._listeners.remove(fn)

    def shutdown(self, wait: bool = True) -> None:
        """Cancel queued and running jobs and stop the workers; calling it again does nothing."""
        with self._submit_lock, self._lock:  # no submit is half done once _closed is set
            if self._closed:
                return
            self._closed = True
            active = [j for j in self._jobs.values() if j.state in ("queued", "running")]
        for job in active:
            self.cancel(job.id)
        for name, _ in self._threads:
            self._queues[name].put(None)  # one stop sentinel per worker, behind the queued jobs
        if wait:
            for _, t in self._threads:
                t.join()
            for worker in self._workers:
                worker.stop()
        self._release_calibrations()
        if self.isolation == "thread":
            torch.set_num_threads(self._prev_threads)
        with _live_roots_lock:
            left = _live_roots.get(self._root, 1) - 1
            if left > 0:
                _live_roots[self._root] = left
            else:
                _live_roots.pop(self._root, None)
        log.info("job runner on %s shut down", self._root)

    def _running(self) -> bool:
        """True while a job of this runner runs (not merely queued)."""
        with self._lock:
            return any(j.state == "running" for j in self._jobs.values())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- internals ------------------------------------------------------------------------------

    def _check_or_defer(self, kind: str, spec: Any) -> tuple[str, ...]:
        """Check ``spec`` now (returns ()), or, when it fails only because it names zoo models that
        jobs queued or running here are about to make, the run ids of those jobs (the classroom demo
        queues its two models, then the stitch of them; it is checked when it starts)."""
        try:
            check_spec(kind, spec, self.store)
            return ()
        except StitchError:
            with self._lock:
                pending = {f"zoo:{zoo_name(j.spec, j.id)}": j.id for j in self._jobs.values()
                           if j.kind == "zoo" and j.state in ("queued", "running")}
            named = set()
            for role in ("a", "b"):
                ref = getattr(spec, role, None)
                if isinstance(ref, str) and ref.startswith("zoo:"):
                    named.add(f"zoo:{parse_ref(ref).name}")
            if waits := tuple(pending[n] for n in sorted(named & set(pending))):
                return waits
        check_spec(kind, spec, self.store)  # once more: a model may have finished between the two looks
        return ()

    def _queue_for(self, device: str | None) -> str:
        if device is None or device.strip().lower() == "auto":
            return self.default_device
        try:
            name = _norm_device(device)
        except StitchError:
            name = device
        if name not in self._queues:
            raise StitchError(f"no job queue for device {device!r}; this runner has: {', '.join(self.devices)}")
        return name

    def _evict(self) -> None:
        """Forget the oldest finished jobs beyond KEEP_FINISHED (caller holds the lock)."""
        finished = [j for j in self._jobs.values() if j.state in FINAL_STATES]
        for job in sorted(finished, key=lambda j: j.seq)[: max(0, len(finished) - KEEP_FINISHED)]:
            del self._jobs[job.id]
