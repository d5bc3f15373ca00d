"""RunQuota (a class's caps on students' runs): per-owner and total caps on live runs, a bounded waiting line
handed over in order as runs end, shared runs free, and a refusal that says why.  Jobs are gates the test
releases (no sleeps decide an outcome)."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass

import pytest

from stitchcore.errors import StitchError
from stitchcore.experiments import RunContext, list_experiments, register_experiment
from stitchcore.jobs import JobRunner
from stitchcore.jobs.quota import QuotaFull, RunQuota
from stitchcore.store.results import Store, run_id_for

TIMEOUT = 60.0
KIND = "quota-test-gate"
RELEASE: dict[str, threading.Event] = {}


@dataclass(frozen=True)
class Gate:
    name: str
    bad: bool = False  # its spec cannot run: the runner refuses it at submit

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Gate:
        return cls(**d)

    def label(self) -> str:
        return f"gate {self.name}"


def _gate(spec: Gate, ctx: RunContext) -> dict:
    deadline = time.monotonic() + TIMEOUT
    while not RELEASE.setdefault(spec.name, threading.Event()).wait(0.01):
        ctx.check_cancel()
        if time.monotonic() > deadline:
            raise RuntimeError(f"gate {spec.name} was never released")
    return {"name": spec.name}


def _check(kind: str, spec: Gate) -> None:
    if spec.bad:
        raise StitchError(f"gate {spec.name} cannot run")


@pytest.fixture(autouse=True, scope="module")
def gate_kind():
    from stitchcore.experiments._registry import EXPERIMENTS

    if KIND not in list_experiments():
        register_experiment(KIND, Gate.from_dict)(_gate)
    yield
    EXPERIMENTS.unregister(KIND)


@pytest.fixture
def runner(tmp_path):
    with JobRunner(Store(tmp_path / "store"), devices=["cpu"], cpu_workers=1, cpu_threads=1) as r:
        yield r
    for event in RELEASE.values():
        event.set()


def _plan(name: str, **kw) -> list:
    return [(KIND, Gate(name, **kw))]


def _release(name: str) -> None:
    RELEASE.setdefault(name, threading.Event()).set()


def test_each_owner_and_the_class_are_capped_and_the_line_moves_in_order(runner):
    quota = RunQuota(runner, per_owner=1, total=2, per_owner_waiting=1, total_waiting=3)
    a1 = quota.submit("ann", _plan("a1"))
    assert not a1.waiting and quota.live("ann") == 1
    a2 = quota.submit("ann", _plan("a2"))  # ann is at her cap: it waits
    assert a2.waiting and quota.ahead_of(a2.run_id) == 0 and runner.get(a2.run_id) is None
    with pytest.raises(QuotaFull, match="already have 1 run"):
        quota.submit("ann", _plan("a3"))  # her waiting line is full too
    b1 = quota.submit("bob", _plan("b1"))  # bob has room and so has the class: handed over by the line
    assert quota.wait_submitted(b1.run_id, TIMEOUT) and runner.get(b1.run_id) is not None
    c1 = quota.submit("cat", _plan("c1"))  # the class has 2 live: cat waits though she has none
    assert c1.waiting and quota.live() == 2 and quota.waiting() == 2
    _release("a1")  # ann's first ends: her second is hers to run, and it goes first (it came first)
    assert quota.wait_submitted(a2.run_id, TIMEOUT) and runner.get(a2.run_id) is not None
    assert quota.ahead_of(c1.run_id) == 0 and runner.get(c1.run_id) is None
    _release("b1")
    assert quota.wait_submitted(c1.run_id, TIMEOUT)
    for name in ("a2", "c1"):
        _release(name)
    assert runner.wait(c1.run_id, TIMEOUT).state == "done" and quota.live() == 0


def test_a_run_already_stored_or_live_is_shared_and_uses_no_quota(runner):
    quota = RunQuota(runner, per_owner=1, total=1)
    first = quota.submit("ann", _plan("s1"))
    again = quota.submit("bob", _plan("s1"))  # thirty students asking for one run share it
    assert again.shared and not again.waiting and again.run_id == first.run_id
    assert quota.live("bob") == 0
    _release("s1")
    assert runner.wait(first.run_id, TIMEOUT).state == "done"
    stored = quota.submit("cat", _plan("s1"))
    assert stored.shared and runner.get(first.run_id).state == "done"


def test_the_class_line_is_bounded(runner):
    quota = RunQuota(runner, per_owner=1, total=1, per_owner_waiting=5, total_waiting=2)
    quota.submit("ann", _plan("l1"))
    quota.submit("bob", _plan("l2"))
    quota.submit("cat", _plan("l3"))
    with pytest.raises(QuotaFull, match="waiting line is full"):
        quota.submit("dan", _plan("l4"))
    assert runner.get(run_id_for(KIND, Gate("l4").to_dict())) is None  # nothing of dan's was queued
    for name in ("l1", "l2", "l3"):
        _release(name)


def test_a_waiting_run_the_runner_refuses_says_why(runner, monkeypatch):
    import stitchcore.jobs.runner as runner_module

    quota = RunQuota(runner, per_owner=1, total=1)
    quota.submit("ann", _plan("e1"))
    bad = quota.submit("bob", _plan("e2", bad=True))
    assert bad.waiting
    monkeypatch.setattr(runner_module.JobRunner, "_check_or_defer", lambda self, kind, spec: _check(kind, spec) or ())
    _release("e1")
    assert quota.wait_submitted(bad.run_id, TIMEOUT)
    assert quota.error(bad.run_id) == "gate e2 cannot run" and quota.live() == 0


def test_caps_below_one_are_refused(runner):
    with pytest.raises(StitchError, match="total must be at least 1"):
        RunQuota(runner, total=0)


def test_a_run_being_handed_over_counts_as_live(runner, monkeypatch):
    """While a run's models are checked (seconds, before the runner holds it), it still takes its place: another
    student's run waits (the e2e class saw three run at once before this)."""
    import stitchcore.jobs.runner as runner_module

    checking, go_on = threading.Event(), threading.Event()

    def slow_check(self, kind, spec):
        if spec.name == "h1":
            checking.set()
            assert go_on.wait(TIMEOUT)
        return ()

    monkeypatch.setattr(runner_module.JobRunner, "_check_or_defer", slow_check)
    quota = RunQuota(runner, per_owner=1, total=1)
    first = threading.Thread(target=quota.submit, args=("ann", _plan("h1")))
    first.start()
    assert checking.wait(TIMEOUT)
    time.sleep(2.5)  # the line's own poll (every second) runs meanwhile: it must not free ann's place
    second = quota.submit("bob", _plan("h2"))
    assert second.waiting and quota.live() == 1
    go_on.set()
    first.join(TIMEOUT)
    for name in ("h1", "h2"):
        _release(name)
    assert quota.wait_submitted(second.run_id, TIMEOUT)
