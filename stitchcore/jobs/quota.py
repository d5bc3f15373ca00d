"""Caps on the runs many people launch through one :class:`~stitchcore.jobs.JobRunner` (a class's students).

Each owner (a student's browser session) may have ``per_owner`` runs queued or running at once, and all owners
together ``total``; a run beyond either cap waits in this quota's own line (``per_owner_waiting`` each,
``total_waiting`` in all) and is handed to the runner, in order, as runs end (looked at every second).  Past the waiting line a run
is refused with a :class:`QuotaFull` that says why.  A run already queued, running or stored comes back as it
is and counts against nobody: thirty students asking for one run share it.

>>> import tempfile
>>> from stitchcore.store.results import Store
>>> from stitchcore.experiments.zoo_recipe import ZooRecipe
>>> with JobRunner(Store(tempfile.mkdtemp())) as runner:
...     quota = RunQuota(runner, per_owner=1, total=1)
...     first = quota.submit("ann", [("zoo", ZooRecipe(seed=0))])  # about a second of training
...     second = quota.submit("bob", [("zoo", ZooRecipe(seed=1, epochs=1))])
...     (first.waiting, second.waiting, quota.ahead_of(second.run_id))
...     runner.wait(first.run_id).state, quota.wait_submitted(second.run_id, timeout=60)
...     runner.wait(second.run_id).state
(False, True, 0)
('done', True)
'done'
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stitchcore.errors import StitchError
from stitchcore.jobs.runner import JobRunner
from stitchcore.store.records import run_id_for

__all__ = ["QuotaFull", "QuotaTicket", "RunQuota"]

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0  # how often the waiting line looks for runs that have ended
Plan = Sequence[tuple[str, Any]]  # [(kind, spec)]: what a run needs first (its models), then the run itself


class QuotaFull(StitchError):
    """A run refused because its owner's or everyone's waiting line is full (the message says which)."""


@dataclass(frozen=True)
class QuotaTicket:
    """What became of one :meth:`RunQuota.submit`: the run's id and whether it waits in the quota's line."""

    run_id: str  # the plan's last run: the one its owner asked for
    waiting: bool  # True: not yet handed to the runner (a cap is reached); it starts as others end
    shared: bool = False  # True: the run was already stored, queued or running (nobody's quota was used)


@dataclass
class _Waiting:
    owner: str
    plan: list[tuple[str, Any]]
    run_id: str


class RunQuota:
    """Per-owner and total caps on live runs over ``runner``, with a bounded waiting line (see the module)."""

    def __init__(self, runner: JobRunner, *, per_owner: int = 1, total: int = 4, per_owner_waiting: int = 2,
                 total_waiting: int = 30) -> None:  # fmt: skip
        for name, value in (("per_owner", per_owner), ("total", total)):
            if value < 1:
                raise StitchError(f"{name} must be at least 1, not {value}")
        self.runner = runner
        self.per_owner, self.total = per_owner, total
        self.per_owner_waiting, self.total_waiting = per_owner_waiting, total_waiting
        self._lock = threading.Condition()
        self._live: dict[str, str] = {}  # run id -> its owner: handed to the runner, not yet final
        self._handing: set[str] = set()  # live run ids being handed over now (not in the runner yet: kept live)
        self._waiting: list[_Waiting] = []  # in order of arrival
        self._errors: dict[str, str] = {}  # run id -> why the runner refused it when its turn came
        self._wake = threading.Event()  # set by a submit that waits: look at the line now, not at the next poll
        self._closed = False
        self._thread = threading.Thread(target=self._drain_loop, name="stitchlab-quota", daemon=True)
        self._thread.start()

    # -- public API -------------------------------------------------------------------------------

    def submit(self, owner: str, plan: Plan) -> QuotaTicket:
        """Hand ``plan`` to the runner now if ``owner`` and everyone are under their caps, else put it in the
        waiting line; a run already stored, queued or running comes back shared.  Raises :class:`QuotaFull`
        when the waiting lines are full, :class:`StitchError` when the runner refuses the run."""
        plan = list(plan)
        if not plan:
            raise StitchError("nothing to run")
        kind, spec = plan[-1]
        run_id = run_id_for(kind, spec.to_dict())
        with self._lock:
            if run_id in self._live or any(w.run_id == run_id for w in self._waiting):
                return QuotaTicket(run_id, waiting=run_id not in self._live, shared=True)
        if self._known(run_id):
            self._hand_over(plan)  # stored or live already: the runner returns it as it is
            return QuotaTicket(run_id, waiting=False, shared=True)
        with self._lock:
            self._prune()
            if self._has_room(owner) and not self._waiting:
                self._live[run_id] = owner
                self._handing.add(run_id)
                room = True
            else:
                mine = sum(w.owner == owner for w in self._waiting)
                if mine >= self.per_owner_waiting:
                    raise QuotaFull(f"you already have {mine} run(s) waiting for a turn (at most "
                                    f"{self.per_owner_waiting}): try again when one has started")  # fmt: skip
                if len(self._waiting) >= self.total_waiting:
                    raise QuotaFull(f"the class's waiting line is full ({self.total_waiting} runs): try again "
                                    "when some have finished")  # fmt: skip
                self._waiting.append(_Waiting(owner, plan, run_id))
                room = False
        if room:
            try:
                self._hand_over(plan)
            except BaseException:
                with self._lock:
                    self._live.pop(run_id, None)
                raise
            finally:
                with self._lock:
                    self._handing.discard(run_id)
            return QuotaTicket(run_id, waiting=False)
        self._wake.set()  # a run may have ended between the prune and now
        return QuotaTicket(run_id, waiting=True)

    def ahead_of(self, run_id: str) -> int | None:
        """How many waiting runs are before ``run_id`` in the line; None when it does not wait."""
        with self._lock:
            for i, w in enumerate(self._waiting):
                if w.run_id == run_id:
                    return i
        return None

    def error(self, run_id: str) -> str | None:
        """Why the runner refused ``run_id`` when its turn came (None: it did not)."""
        with self._lock:
            return self._errors.get(run_id)

    def live(self, owner: str | None = None) -> int:
        """Runs handed to the runner and not yet final: ``owner``'s, or everyone's."""
        with self._lock:
            self._prune()
            return sum(owner is None or o == owner for o in self._live.values())

    def waiting(self, owner: str | None = None) -> int:
        """Runs in the waiting line: ``owner``'s, or everyone's."""
        with self._lock:
            return sum(owner is None or w.owner == owner for w in self._waiting)

    def wait_submitted(self, run_id: str, timeout: float | None = None) -> bool:
        """Block until ``run_id`` has left the waiting line (handed over or refused); False on time-out."""
        with self._lock:
            return self._lock.wait_for(lambda: all(w.run_id != run_id for w in self._waiting), timeout)

    def close(self) -> None:
        """Stop handing waiting runs over (they are dropped); calling it again does nothing."""
        with self._lock:
            self._closed = True
            self._waiting.clear()
            self._lock.notify_all()
        self._wake.set()

    # -- internals --------------------------------------------------------------------------------

    def _known(self, run_id: str) -> bool:
        snap = self.runner.get(run_id)
        return snap is not None and (snap.state == "done" or not snap.is_final)

    def _hand_over(self, plan: list[tuple[str, Any]]) -> None:
        for kind, spec in plan:
            self.runner.submit(kind, spec)

    def _has_room(self, owner: str) -> bool:
        mine = sum(o == owner for o in self._live.values())
        return mine < self.per_owner and len(self._live) < self.total

    def _prune(self) -> None:
        """Forget live runs that have ended (under the lock)."""
        for run_id in list(self._live):
            if run_id in self._handing:
                continue  # its models are being checked: the runner does not hold it yet
            snap = self.runner.get(run_id)
            if snap is None or snap.is_final:
                del self._live[run_id]

    def _next(self) -> _Waiting | None:
        """The first waiting run whose owner has room, moved to live (under the lock)."""
        self._prune()
        for i, w in enumerate(self._waiting):
            if self._has_room(w.owner):
                del self._waiting[i]
                self._live[w.run_id] = w.owner
                self._handing.add(w.run_id)
                return w
        return None

    def _drain_loop(self) -> None:
        while True:
            # A poll, not a runner listener: a listener makes the runner copy a job's whole curve on every step of
            # it (JobRunner._notify), which cost a 30-student class a third of its run's speed (bench, 0.66 of solo).
            self._wake.wait(timeout=POLL_SECONDS)
            self._wake.clear()
            with self._lock:
                if self._closed or self.runner.closed:
                    self._closed = True
                    self._waiting.clear()
                    self._lock.notify_all()
                    return
            try:
                self._drain()
            except Exception:  # the line must outlive one bad turn (a store hiccup)
                log.exception("quota: handing waiting runs over failed; trying again")

    def _drain(self) -> None:
        """Hand waiting runs over while their owners and the class have room."""
        while True:
            with self._lock:
                item = self._next()
            if item is None:
                break
            try:
                self._hand_over(item.plan)
            except Exception as exc:  # noqa: BLE001 - the owner's page shows why; the line goes on
                log.warning("quota: run %s refused when its turn came: %s", item.run_id, exc)
                with self._lock:
                    self._live.pop(item.run_id, None)
                    self._errors[item.run_id] = str(exc)
            with self._lock:
                self._handing.discard(item.run_id)
                self._lock.notify_all()
