"""JobRunner: background jobs over the store (dedupe, cache, cancel, failures, restart, FIFO).

Timing-sensitive steps are driven by Events: a registered ``jobs-test-gate``
experiment waits for the test to release it, and listeners act from inside the
worker thread at exact points of a real stitch; no sleeps decide an outcome.
"""

from __future__ import annotations

import queue
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass

import pytest

from stitchcore.errors import CutError, StitchError
from stitchcore.experiments import RunContext, list_experiments, register_experiment
from stitchcore.jobs import JobRunner, JobSnapshot
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.store.results import Store, run_id_for

TIMEOUT = 60.0  # generous upper bound for any wait; a healthy run takes ~1-3 s

# -- a controllable experiment ---------------------------------------------------------------------

GATES: dict[str, tuple[threading.Event, threading.Event]] = {}  # name -> (started, release)
STEPS: dict[str, tuple[queue.Queue, queue.Queue]] = {}  # stepped gates: name -> (fractions to report, acks)
RAN: list[str] = []  # names in the order the gate experiment ran them


@dataclass(frozen=True)
class GateSpec:
    name: str  # key into GATES; unique per test so run ids never collide
    block: bool = False  # wait for the test to set the release event
    fail: str = ""  # raise RuntimeError(fail) instead of finishing
    stepped: bool = False  # report the progress fractions the test puts in STEPS[name] (None ends)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> GateSpec:
        return cls(**d)

    def label(self) -> str:
        return f"gate {self.name}"


def _gate(spec: GateSpec, ctx: RunContext) -> dict:
    RAN.append(spec.name)
    started, release = GATES.setdefault(spec.name, (threading.Event(), threading.Event()))
    ctx.log(0, {"x": 1.0})
    started.set()
    if spec.fail:
        raise RuntimeError(spec.fail)
    while spec.stepped and (fraction := _steps(spec.name)[0].get(timeout=TIMEOUT)) is not None:
        ctx.progress(fraction, f"step to {fraction:.0%}")
        _steps(spec.name)[1].put(fraction)
    deadline = time.monotonic() + TIMEOUT  # a broken test must not hang the suite
    while spec.block and not release.wait(0.01):
        ctx.check_cancel()  # the way real experiments stop: checked every step
        if time.monotonic() > deadline:
            raise RuntimeError(f"gate {spec.name} was never released")
    ctx.check_cancel()
    ctx.log(1, {"x": 2.0})
    return {"name": spec.name}


@pytest.fixture(autouse=True, scope="module")
def gate_kind():
    """The gate experiment exists while this module's tests run, and is gone after (other tests and the
    library's doctests see only the built-in kinds)."""
    from stitchcore.experiments._registry import EXPERIMENTS

    if "jobs-test-gate" not in list_experiments():
        register_experiment("jobs-test-gate", GateSpec.from_dict)(_gate)
    yield
    EXPERIMENTS.unregister("jobs-test-gate")


def _gate_started(name: str) -> threading.Event:
    return GATES.setdefault(name, (threading.Event(), threading.Event()))[0]


def _steps(name: str) -> tuple[queue.Queue, queue.Queue]:
    return STEPS.setdefault(name, (queue.Queue(), queue.Queue()))


def _step(runner: JobRunner, job_id: str, name: str, fraction: float | None) -> JobSnapshot:
    """Make the stepped gate ``name`` report ``fraction``; the job's snapshot right after."""
    todo, acks = _steps(name)
    todo.put(fraction)
    if fraction is not None:
        assert acks.get(timeout=TIMEOUT) == fraction
    return runner.get(job_id)


def _release(name: str) -> None:
    GATES.setdefault(name, (threading.Event(), threading.Event()))[1].set()


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def job_store(trained_store, tmp_path_factory):
    """A private copy of the session store (zoo models included), so these runs touch no other test."""
    import shutil

    src, refs = trained_store
    root = tmp_path_factory.mktemp("jobs-store")
    with sqlite3.connect(src.db_path) as a, sqlite3.connect(root / src.db_path.name) as b:
        a.backup(b)
    shutil.copytree(src.blobs, root / "blobs")
    store = Store(root)
    yield store, refs
    store.close()


@pytest.fixture
def make_runner(job_store):
    runners: list[JobRunner] = []

    def make(store: Store | None = None) -> JobRunner:
        runner = JobRunner(store or job_store[0], devices=["cpu"], cpu_workers=1, cpu_threads=1)
        runners.append(runner)
        return runner

    yield make
    for _, release in GATES.values():  # a failed test may leave a gate closed
        release.set()
    for runner in runners:
        runner.shutdown()


def _stitch(refs, **kw) -> StitchSpec:
    return StitchSpec(a=refs[0], b=refs[1], cut_a="block1", cut_b="block1", **{"epochs": 2, **kw})


# -- tests ---------------------------------------------------------------------------------------


def test_submit_wait_done_with_summary_and_history(job_store, make_runner):
    store, refs = job_store
    runner = make_runner()
    spec = _stitch(refs, seed=201)
    first = runner.submit("stitch", spec)
    assert first.id == run_id_for("stitch", spec.to_dict()) and first.state in ("queued", "running")
    assert store.lookup(first.id) is not None  # the row exists for other sessions at once
    snap = runner.wait(first.id, timeout=TIMEOUT)
    assert snap.state == "done" and not snap.cached and snap.error is None and snap.progress == 1.0
    assert 0.0 <= snap.summary["accuracy"] <= 1.0 and snap.device == "cpu"
    assert snap.started is not None and snap.finished >= snap.started >= snap.submitted
    assert {"loss", "val_accuracy"} <= set(snap.metrics)
    assert snap.metrics == store.series(first.id)  # live history == persisted series, point for point
    assert store.lookup(first.id).status == "done"
    assert [j.id for j in runner.list()] == [first.id] and runner.list(active_only=True) == []


def test_done_spec_is_a_cached_snapshot_at_once(job_store, make_runner, monkeypatch):
    store, refs = job_store
    runner = make_runner()
    spec = _stitch(refs, seed=202)
    done = runner.wait(runner.submit("stitch", spec).id, timeout=TIMEOUT)
    begins: list[str] = []
    monkeypatch.setattr(store, "begin", lambda run_id, *a, **k: begins.append(run_id))
    monkeypatch.setattr(store, "enqueue", lambda run_id, *a, **k: begins.append(run_id))
    again = runner.submit("stitch", spec)
    assert again.state == "done" and again.cached and again.summary == done.summary
    assert again.metrics == done.metrics and begins == []  # no store row touched, no thread work
    assert make_runner().submit("stitch", spec).cached  # a fresh runner: straight from the store


def test_same_spec_while_queued_or_running_is_one_job(job_store, make_runner, monkeypatch):
    store, _ = job_store
    begins: list[str] = []
    real_begin = store.begin
    monkeypatch.setattr(store, "begin", lambda run_id, *a, **k: begins.append(run_id) or real_begin(run_id, *a, **k))
    runner = make_runner()
    blocker, queued = GateSpec("dedupe-running", block=True), GateSpec("dedupe-queued")
    first = runner.submit("jobs-test-gate", blocker)
    assert _gate_started("dedupe-running").wait(TIMEOUT)
    waiting = runner.submit("jobs-test-gate", queued)
    again, again_queued = runner.submit("jobs-test-gate", blocker), runner.submit("jobs-test-gate", queued)
    assert (again.id, again.state) == (first.id, "running") and again_queued.state == "queued"
    assert again_queued.id == waiting.id and len(runner.list()) == 2
    assert runner.submit("jobs-test-gate", blocker, rerun=True).id == first.id  # still the running one
    _release("dedupe-running")
    assert runner.wait(first.id, timeout=TIMEOUT).state == "done"
    assert runner.wait(waiting.id, timeout=TIMEOUT).state == "done"
    assert begins.count(first.id) == 1 and begins.count(waiting.id) == 1


def test_series_grows_in_the_store_while_running(job_store, make_runner):
    store, refs = job_store
    runner = make_runner()
    spec = _stitch(refs, seed=203, epochs=4)
    job_id = run_id_for("stitch", spec.to_dict())
    seen: list[tuple[str, int]] = []  # (job state, loss points in the store) at each update

    def watch(snap: JobSnapshot) -> None:  # runs in the worker thread, right after each point is logged
        if snap.id == job_id and snap.state == "running" and "loss" in snap.metrics:
            seen.append((snap.state, len(store.series(job_id, ["loss"]).get("loss", []))))

    runner.add_listener(watch)
    snap = runner.wait(runner.submit("stitch", spec).id, timeout=TIMEOUT)
    assert snap.state == "done"
    counts = sorted({n for _, n in seen})
    assert len(counts) >= 4 and counts[0] >= 1, "the store gained loss points during the run"
    assert counts[-1] <= len(snap.metrics["loss"]) == len(store.series(job_id)["loss"])


def test_cancel_mid_run_marks_job_and_row_cancelled(job_store, make_runner):
    store, refs = job_store
    runner = make_runner()
    spec = _stitch(refs, seed=204, epochs=4)
    job_id = run_id_for("stitch", spec.to_dict())
    runner.add_listener(lambda s: s.id == job_id and "loss" in s.metrics and runner.cancel(job_id))
    runner.submit("stitch", spec)
    snap = runner.wait(job_id, timeout=TIMEOUT)
    assert snap.state == "cancelled" and "cancel" in snap.error and snap.summary is None
    assert 0.0 < snap.progress < 0.95 and snap.metrics["loss"]  # stopped part way, curve kept
    row = store.lookup(job_id)
    assert row.status == "cancelled" and row.error
    assert runner.cancel(job_id) is False  # already final


def test_cancel_queued_job_drops_it_at_once(job_store, make_runner):
    store, _ = job_store
    runner = make_runner()
    blocker = runner.submit("jobs-test-gate", GateSpec("cq-block", block=True))
    assert _gate_started("cq-block").wait(TIMEOUT)
    queued = runner.submit("jobs-test-gate", GateSpec("cq-queued"))
    assert runner.cancel(queued.id) is True
    now = runner.get(queued.id)
    assert now.state == "cancelled" and now.finished is not None
    assert store.lookup(queued.id).status == "cancelled"
    _release("cq-block")
    assert runner.wait(blocker.id, timeout=TIMEOUT).state == "done"
    follow = runner.submit("jobs-test-gate", GateSpec("cq-after"))  # runs after the dropped one's slot
    assert runner.wait(follow.id, timeout=TIMEOUT).state == "done"
    assert "cq-queued" not in RAN and runner.get(queued.id).state == "cancelled"


def test_failures_are_one_line_and_the_worker_goes_on(job_store, make_runner):
    store, refs = job_store
    runner = make_runner()
    bad = StitchSpec(a=refs[0], b=refs[1], cut_a="nope", cut_b="block1", epochs=1)
    with pytest.raises(CutError) as refused:  # refused at submit, before any row is written
        runner.submit("stitch", bad)
    error = str(refused.value)
    assert error.startswith("no cut 'nope'") and ("cuts run from" in error or "close:" in error)
    assert "\n" not in error and store.lookup(run_id_for("stitch", bad.to_dict())) is None
    assert runner.list() == []
    bug = runner.submit("jobs-test-gate", GateSpec("boom", fail="boom\nsecond line"))
    after = runner.submit("jobs-test-gate", GateSpec("after-failures"))
    crashed = runner.wait(bug.id, timeout=TIMEOUT)
    assert crashed.state == "failed" and crashed.error == "RuntimeError: boom"
    assert store.lookup(bug.id).status == "failed"
    assert runner.wait(after.id, timeout=TIMEOUT).state == "done"


def test_a_stitch_of_models_still_queued_is_checked_when_it_starts(job_store, make_runner):
    """The classroom demo queues two zoo models, then their stitch: that submit cannot check the cuts
    yet, so the job checks them when it starts; a bad one leaves no row behind."""
    from stitchcore.experiments.zoo import ZooRecipe

    store, refs = job_store
    runner = make_runner()
    blocker = runner.submit("jobs-test-gate", GateSpec("hold-the-queue", block=True))
    assert _gate_started("hold-the-queue").wait(TIMEOUT)
    recipe = ZooRecipe(arch="cnn", dataset="digits", seed=7)  # a plain recipe: zoo:cnn-digits-s7
    model = runner.submit("zoo", recipe)
    new_ref = "zoo:" + recipe.short_name()
    good = runner.submit("stitch", StitchSpec(a=refs[0], b=new_ref, cut_a="block1", cut_b="block1", epochs=1))
    bad = runner.submit("stitch", StitchSpec(a=refs[0], b=new_ref, cut_a="nope", cut_b="block1", epochs=1))
    assert (good.state, bad.state) == ("queued", "queued") and store.lookup(bad.id).status == "queued"
    assert good.waits_for == (model.id,) and runner.get(good.id).waits_for == (model.id,)
    assert [s.id for s in runner.ahead_of(good.id)] == [blocker.id, model.id]  # what its run view shows
    assert runner.ahead_of(blocker.id) == []  # running: waits for nothing
    with pytest.raises(StitchError, match="zoo:cnn-digits-s8 is not in the store"):  # nothing queued makes it
        runner.submit("stitch", StitchSpec(a=refs[0], b="zoo:cnn-digits-s8", cut_a="block1", cut_b="block1"))
    _release("hold-the-queue")
    assert runner.wait(blocker.id, timeout=TIMEOUT).state == "done"
    assert runner.wait(model.id, timeout=TIMEOUT).state == "done"
    assert runner.wait(good.id, timeout=TIMEOUT).state == "done"
    refused = runner.wait(bad.id, timeout=TIMEOUT)
    assert refused.state == "failed" and refused.error.startswith("no cut 'nope'")
    assert store.lookup(bad.id) is None  # its queued placeholder is gone, nothing clutters the store


def test_get_rebuilds_runs_from_the_store(job_store, make_runner):
    _, refs = job_store
    first = make_runner()
    job_id = first.submit("stitch", _stitch(refs, seed=205)).id
    live = first.wait(job_id, timeout=TIMEOUT)
    first.shutdown()
    other = make_runner()  # another process / a reloaded app: nothing in memory
    assert other.list() == []
    snap = other.get(job_id)
    assert snap.state == "done" and snap.summary == live.summary and snap.metrics == live.metrics
    assert snap.kind == "stitch" and snap.device == "cpu" and snap.progress == 1.0
    assert other.get("0123456789abcdef") is None
    with pytest.raises(StitchError, match="unknown job id"):
        other.wait("0123456789abcdef", timeout=1)


def test_runner_start_marks_dead_processes_runs_interrupted(tmp_path, make_runner):
    store = Store(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    alive = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        for name, pid in (("dead", int(dead.stdout)), ("alive", alive.pid)):
            ghost = Store(tmp_path)
            ghost._owner = f"{socket.gethostname()}:{pid}"  # write as that process would
            ghost.begin(run_id_for("jobs-test-gate", {"name": name}), "jobs-test-gate", {"name": name})
            ghost.close()
        runner = make_runner(store)
        dead_row = store.lookup(run_id_for("jobs-test-gate", {"name": "dead"}))
        assert dead_row.status == "interrupted" and "re-run" in dead_row.error
        assert store.lookup(run_id_for("jobs-test-gate", {"name": "alive"})).status == "running"
        assert runner.get(dead_row.id).state == "interrupted"
    finally:
        alive.stdin.close()
        alive.wait(TIMEOUT)
        store.close()


def test_one_worker_runs_jobs_in_submit_order(make_runner):
    runner = make_runner()
    blocker = runner.submit("jobs-test-gate", GateSpec("fifo-block", block=True))
    assert _gate_started("fifo-block").wait(TIMEOUT)
    names = [f"fifo-{i}" for i in range(5)]
    ids = [runner.submit("jobs-test-gate", GateSpec(n)).id for n in names]
    assert [j.id for j in runner.list(active_only=True)] == [*reversed(ids), blocker.id]  # newest first
    _release("fifo-block")
    assert all(runner.wait(i, timeout=TIMEOUT).state == "done" for i in ids)
    assert [n for n in RAN if n.startswith("fifo-")] == ["fifo-block", *names]


def test_shutdown_cancels_running_jobs_and_is_idempotent(job_store, make_runner):
    store, _ = job_store
    runner = make_runner()
    running = runner.submit("jobs-test-gate", GateSpec("shutdown-run", block=True))
    assert _gate_started("shutdown-run").wait(TIMEOUT)
    queued = runner.submit("jobs-test-gate", GateSpec("shutdown-queued"))
    runner.shutdown()
    runner.shutdown()
    assert runner.get(running.id).state == "cancelled" and runner.get(queued.id).state == "cancelled"
    assert store.lookup(running.id).status == "cancelled" and store.lookup(queued.id).status == "cancelled"
    with pytest.raises(StitchError, match="shut down"):
        runner.submit("jobs-test-gate", GateSpec("shutdown-late"))


def test_bad_kind_and_device_are_user_errors(make_runner):
    runner = make_runner()
    with pytest.raises(StitchError, match="unknown experiment kind"):
        runner.submit("nope", GateSpec("x"))
    with pytest.raises(StitchError, match="no job queue for device"):
        runner.submit("jobs-test-gate", GateSpec("x"), device="mps")
    assert runner.list() == []


def test_eta_appears_once_progress_means_something_and_decreases(make_runner, monkeypatch):
    from stitchcore.jobs import snapshot as jobs

    monkeypatch.setattr(jobs, "ETA_MIN_SECONDS", 0.1)
    runner = make_runner()
    job = runner.submit("jobs-test-gate", GateSpec("eta", stepped=True))
    assert job.eta_seconds() is None  # queued
    first = _step(runner, job.id, "eta", 0.1)
    assert first.state == "running" and first.rate_from is not None and first.eta_seconds() is None
    time.sleep(0.3)
    early = _step(runner, job.id, "eta", 0.3).eta_seconds()
    time.sleep(0.3)
    later = _step(runner, job.id, "eta", 0.6).eta_seconds()
    assert early is not None and later is not None and 0 < later < early
    assert early == pytest.approx(0.7 * 0.3 / 0.2, rel=0.5)  # (1 - 0.3) left at 0.2 per 0.3 s
    _step(runner, job.id, "eta", None)
    done = runner.wait(job.id, timeout=TIMEOUT)
    assert done.state == "done" and done.eta_seconds() is None
