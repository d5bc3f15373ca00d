"""What a page or the CLI sees of a job: a frozen :class:`JobSnapshot`, its states, and its time left.

The time left is extrapolated from the progress rate within one phase (:func:`progress_phase`):
model loading and a quick caching phase do not count towards the rate of training steps.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from stitchcore.timewords import date_words

__all__ = ["ETA_MIN_PROGRESS", "ETA_MIN_SECONDS", "FINAL_STATES", "JOB_STATES", "JobSnapshot", "progress_phase"]

JOB_STATES = ("queued", "running", "done", "failed", "cancelled", "interrupted")
FINAL_STATES = frozenset({"done", "failed", "cancelled", "interrupted"})
# A running job's time left is extrapolated from its progress rate (measured from the first report above 0 of
# its current phase, see progress_phase, so model loading and a quick caching phase do not count) once it has moved ETA_MIN_PROGRESS in ETA_MIN_SECONDS, or at all
# in three times as long (a long job moves slowly)
ETA_MIN_PROGRESS = 0.03
ETA_MIN_SECONDS = 3.0


@dataclass(frozen=True)
class JobSnapshot:
    """A copy of one job's state, taken under the runner's lock; safe to read from any thread."""

    id: str  # run id (hash of kind + spec): the dedupe key and the ?run= URL value
    kind: str  # experiment kind: "stitch", "zoo" ...
    label: str  # short human label for lists
    state: str  # one of JOB_STATES
    progress: float  # 0..1
    message: str  # latest progress message ("training adapter: step 40/88")
    metrics: dict[str, list[tuple[int, float]]]  # persisted points so far: name -> [(step, value)] by step
    error: str | None  # one-line message for failed / cancelled / interrupted jobs
    summary: dict | None  # the stored summary once done
    cached: bool  # True when the result came from the store, not from running it here
    submitted: float  # time.time() of the submit (store: row creation)
    started: float | None  # when it began running
    finished: float | None  # when it reached a final state
    device: str  # queue it ran on ("cpu", "cuda:0"); stored device for reconstructed runs
    spec: Any = None  # the spec object (read only); None when the stored spec cannot be rebuilt
    rate_from: tuple[float, float] | None = None  # (time.time(), progress) where the current phase's rate starts
    waits_for: tuple[str, ...] = ()  # queued here: run ids of the zoo jobs making the models its spec names
    imported: float | None = None  # when the store imported the run from a bundle; None: computed there
    imported_from: str | None = None  # that bundle's file name

    @property
    def is_final(self) -> bool:
        """True once the job will not change any more."""
        return self.state in FINAL_STATES

    def origin_words(self) -> str:
        """Where a result shown without running it comes from, in words ('' for a job that ran here now):
        a run imported from a bundle, or a result stored before (opened by a link, from Results, or
        launched again), with the date it was run.

        >>> import time
        >>> when = time.mktime((2026, 11, 20, 9, 5, 0, 0, 0, -1))
        >>> stored = JobSnapshot("id", "zoo", "x", "done", 1.0, "", {}, None, {}, True, when, when, when,
        ...                      "cpu")
        >>> stored.origin_words()
        'stored result (run 20 Nov 2026, 09:05)'
        >>> from dataclasses import replace
        >>> replace(stored, imported=when + 86400, imported_from="runs.zip").origin_words()
        'imported from the bundle runs.zip on 21 Nov 2026, 09:05 (run 20 Nov 2026, 09:05)'
        >>> replace(stored, cached=False).origin_words()
        ''
        """
        ran = date_words(self.finished or self.started or self.submitted)
        if self.imported is not None:
            bundle = f"the bundle {self.imported_from}" if self.imported_from else "a bundle"
            return f"imported from {bundle} on {date_words(self.imported)} (run {ran})"
        return f"stored result (run {ran})" if self.cached else ""

    def eta_seconds(self, now: float | None = None) -> float | None:
        """Seconds left for a running job, from its progress rate so far; None until that means something
        (ETA_MIN_PROGRESS moved in ETA_MIN_SECONDS, or any move in three times as long), and for jobs not
        running.

        >>> snap = JobSnapshot("id", "zoo", "x", "running", 0.5, "", {}, None, None, False, 0.0, 0.0, None,
        ...                    "cpu", rate_from=(100.0, 0.1))
        >>> snap.eta_seconds(now=140.0), snap.eta_seconds(now=101.0)
        (50.0, None)
        """
        if self.state != "running" or self.rate_from is None:
            return None
        t0, p0 = self.rate_from
        elapsed, moved = (time.time() if now is None else now) - t0, self.progress - p0
        if moved <= 0 or elapsed < ETA_MIN_SECONDS or (moved < ETA_MIN_PROGRESS and elapsed < 3 * ETA_MIN_SECONDS):
            return None
        return max(0.0, (1.0 - self.progress) * elapsed / moved)


def progress_phase(message: str) -> str:
    """What a progress message says is happening, without its counts: the time left is extrapolated
    from the rate within one phase (caching activations runs at another pace than training steps).

    >>> progress_phase("training adapter: step 40/88") == progress_phase("training adapter: step 41/88")
    True
    >>> progress_phase("caching prefix activations") == progress_phase("training adapter: step 1/88")
    False
    """
    return re.sub(r"[-+]?\d[\d.,e+-]*", "#", message).strip()
