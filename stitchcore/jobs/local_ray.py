"""The Ray a runner's jobs start on this machine: :class:`LocalRay` (its state) and :class:`LocalRayKeeper`.

A job whose setting is ``RunOptions("ray")`` without an address starts a Ray on this machine (its processes
hold about 2 GB).  It lives in the process that ran the job (the worker child, or this process in thread mode)
and is kept for the next job while the setting uses it.  Once the setting no longer does, the runner stops it
at once where no job runs on it, else as soon as the running job ends.  :class:`LocalRayKeeper` is that part
of :class:`~stitchcore.jobs.runner.JobRunner` (a base class): :meth:`~LocalRayKeeper.local_ray`,
:meth:`~LocalRayKeeper.stop_local_ray`, and the release after each job.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from stitchcore.backends import RunOptions, local_ray_up, stop_local_ray
from stitchcore.jobs._job import _Job
from stitchcore.jobs.snapshot import JobSnapshot
from stitchcore.jobs.worker import WorkerProcess

__all__ = ["LocalRay", "LocalRayKeeper"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LocalRay:
    """The Ray this runner's jobs started on this machine, as :meth:`JobRunner.local_ray` sees it."""

    up: bool  # it is running (its processes hold about 2 GB)
    wanted: bool  # the runner's setting still sends jobs to it
    busy: tuple[JobSnapshot, ...] = ()  # running jobs whose units run on it: it stops after they end

    @property
    def lingering(self) -> bool:
        """Up although the setting no longer uses it (a job still runs on it, or stopping it failed)."""
        return self.up and not self.wanted


class LocalRayKeeper:
    """Mixin of :class:`~stitchcore.jobs.runner.JobRunner`: the Ray its jobs started on this machine, whether
    it is up, and stopping it once the setting no longer uses it."""

    # set by JobRunner.__init__
    options: RunOptions
    _lock: threading.Lock
    _jobs: dict[str, _Job]
    _workers: list[WorkerProcess]
    _ray_here: bool  # thread mode: a job of this runner started a Ray in this process, still up
    cancel: Callable[[str], bool]  # JobRunner.cancel

    def local_ray(self) -> LocalRay:
        """Whether a Ray this runner's jobs started on this machine is up, wanted, and busy."""
        with self._lock:
            workers = list(self._workers)
            busy = tuple(j.snapshot() for j in sorted(self._jobs.values(), key=lambda j: j.seq)
                         if j.state == "running" and j.options is not None and j.options.local_ray)  # fmt: skip
        up = self._ray_here or any(w.ray_up for w in workers) or bool(busy)  # a job on it: started, or starting
        return LocalRay(up=up, wanted=self.options.local_ray, busy=busy)

    def stop_local_ray(self, cancel_jobs: bool = False) -> LocalRay:
        """Stop the Ray this runner's jobs started on this machine wherever no job runs on it now (a job
        running on it keeps it until the job ends, then it stops if the setting no longer uses it);
        ``cancel_jobs``: first cancel the jobs running on it (they end within seconds, keeping their
        finished cells).  Returns the state after."""
        if cancel_jobs:
            for job in self.local_ray().busy:
                self.cancel(job.id)
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            if worker.ray_up and worker.stop_ray():  # None: it runs a job; after it, _release_ray
                log.info("stopped the Ray started by %s", worker.name)
        self._release_here()
        return self.local_ray()

    @contextmanager
    def _noting_local_ray(self) -> Iterator[None]:
        """Thread mode, around a job run in this process: a Ray it started here is this runner's to stop."""
        ray_before = local_ray_up()
        try:
            yield
        finally:
            if not ray_before and local_ray_up():
                self._ray_here = True  # this job started it: this runner stops it when it is not wanted

    def _release_here(self) -> None:
        """Thread mode: stop the Ray a job of this runner started in this process, unless a job uses it."""
        if not self._ray_here:
            return
        with self._lock:
            if any(j.state == "running" and j.options is not None and j.options.local_ray
                   for j in self._jobs.values()):  # fmt: skip
                return
            self._ray_here = False
        if stop_local_ray():
            log.info("stopped the Ray this process started")

    def _release_ray(self, worker: WorkerProcess | None) -> None:
        """After a job: the Ray it left up on this machine stops if the setting no longer uses it."""
        if self.options.local_ray:
            return
        try:
            if worker is not None and worker.ray_up:
                worker.stop_ray()
            self._release_here()
        except Exception:  # never kill a worker thread over the cleanup
            log.exception("could not stop the Ray started on this machine")
