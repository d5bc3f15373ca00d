"""One job as the runner holds it (private to :mod:`stitchcore.jobs`).

:class:`_Job`: its mutable state, touched only by the runner and its parts (:mod:`.local_ray`,
:mod:`._execution`) under the runner's lock; pages see its :class:`~stitchcore.jobs.snapshot.JobSnapshot`.
:func:`_label`: its short label; :data:`Listener`: what
:meth:`~stitchcore.jobs.runner.JobRunner.add_listener` takes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stitchcore.backends import RunOptions
from stitchcore.jobs.snapshot import JobSnapshot

__all__ = ["Listener"]

Listener = Callable[["JobSnapshot"], None]


@dataclass
class _Job:
    """Mutable state of one job; only touched under ``JobRunner._lock``."""

    id: str
    kind: str
    spec: Any
    label: str
    device: str
    rerun: bool
    submitted: float
    seq: int  # submit order in this runner (list() sorts on it)
    state: str = "queued"
    progress: float = 0.0
    message: str = "queued"
    metrics: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    error: str | None = None
    summary: dict | None = None
    cached: bool = False
    started: float | None = None
    finished: float | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    stop_worker: Callable[[], None] | None = None  # process mode: asks the child running it to stop
    waits_for: tuple[str, ...] = ()  # the queued zoo jobs making models its spec names: checked when it starts
    rate_from: tuple[float, float] | None = None  # (time, progress) of the current phase's first report above 0
    rate_phase: str = ""  # that phase: its progress message with the numbers blanked (progress_phase)
    options: RunOptions | None = None  # where its units run (the runner's setting when submitted; None: local)
    imported: float | None = None  # a stored hit imported from a bundle: when (RunRecord.imported)
    imported_from: str | None = None  # and from which bundle file

    @property
    def checked(self) -> bool:
        """False: its spec names a zoo model a job queued here is making; it is checked when it starts."""
        return not self.waits_for

    def snapshot(self) -> JobSnapshot:
        return JobSnapshot(
            self.id, self.kind, self.label, self.state, self.progress, self.message,
            {name: list(points) for name, points in self.metrics.items()}, self.error,
            dict(self.summary) if self.summary is not None else None, self.cached,
            self.submitted, self.started, self.finished, self.device, self.spec, self.rate_from, self.waits_for,
            self.imported, self.imported_from,
        )


def _label(kind: str, spec: Any) -> str:
    if callable(getattr(spec, "label", None)):
        return str(spec.label())
    if callable(getattr(spec, "short_name", None)):
        return f"{kind}:{spec.short_name()}"
    return kind
