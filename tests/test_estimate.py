"""Run-time estimates (stitchcore.experiments.estimate): calibrated once per process, scaled by the spec,
close to a real run on this machine, and silent (None) where they cannot say."""

from __future__ import annotations

import sys
import threading
import time
from types import ModuleType, SimpleNamespace

import pytest

from stitchcore.experiments import get_experiment, list_experiments, run_experiment
from stitchcore.experiments import zoo as zoo_kind
from stitchcore.experiments import calibration as cal
from stitchcore.experiments import estimate as est
from stitchcore.experiments import timing
from stitchcore.experiments.estimate import Estimate, estimate_plan, estimate_seconds
from stitchcore.experiments.lm import DepthSpec, LMStitchSpec
from stitchcore.experiments.matrix import MatrixSpec
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.store.results import Store
from tests.lm_helpers import tiny_recipe, train_tiny


def _no_background() -> None:
    """Wait until no page's background calibration runs (it would add to the cache and load the CPU)."""
    deadline = time.monotonic() + 120
    while est.calibrating():
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.fixture
def store(trained_store) -> tuple[Store, list[str]]:
    return trained_store


class _Ticks:
    """A clock that moves on one tick (1 ms) each time it is read, whatever the machine is doing."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 1e-3
        return self.now


def _timing_modules() -> list[ModuleType]:
    """The modules whose code times a calibration: the engine's timing helpers, and each kind's estimator (in its
    kind's module, with the char-GPT recipes' in lm_zoo)."""
    names = {"stitchcore.experiments.timing", "stitchcore.experiments.lm_zoo"}
    names |= {get_experiment(k).estimate.__module__ for k in list_experiments()}
    return [sys.modules[n] for n in sorted(names)]


def _set_clock(patch, perf_counter) -> None:
    """Every timing module reads ``perf_counter`` for its time."""
    for module in _timing_modules():
        patch.setattr(module, "time", SimpleNamespace(perf_counter=perf_counter, monotonic=time.monotonic))


@pytest.fixture
def ticks(monkeypatch) -> _Ticks:
    """The estimator times its calibrations on a :class:`_Ticks` clock: every timed stretch costs the ticks its
    code reads, so unit costs are fixed and an estimate is exact arithmetic on the spec's counts (on the real
    clock two close estimates timed a moment apart on a shared machine swap order: 0.1211 s vs 0.1201 s seen).
    Calibrations are cleared before (none timed on the real clock is used) and after (none of these is kept)."""
    _no_background()  # a background calibration would read the clock too
    est.clear_calibrations()
    clock = _Ticks()
    _set_clock(monkeypatch, clock.perf_counter)
    yield clock
    est.clear_calibrations()


def test_calibration_runs_once_and_is_cached(store, monkeypatch):
    st, _ = store
    recipe = ZooRecipe(arch="mlp", seed=41, epochs=3)
    _no_background()
    est.clear_calibrations()
    first = estimate_seconds("zoo", recipe, st)
    assert isinstance(first, Estimate) and first.seconds > 0 and not first.stored
    assert first.low < first.seconds < first.high and "1 step of mlp" in first.basis
    assert est.calibrations() == 1

    def timed_again(*_a, **_k):
        raise AssertionError("calibrated a second time")  # estimate_seconds would say None

    monkeypatch.setattr(zoo_kind, "_zoo_units", timed_again)
    again = estimate_seconds("zoo", ZooRecipe(arch="mlp", seed=42, epochs=30), st)  # another seed and length
    assert again is not None and est.calibrations() == 1  # arithmetic only, nothing timed
    assert again.seconds > first.seconds
    assert "on this machine" in again.describe() and "calibrated" in again.describe()


def test_estimates_scale_with_the_work(store, ticks):
    st, (a, b) = store
    zoo = [estimate_seconds("zoo", ZooRecipe(arch="cnn", seed=43, epochs=e), st).seconds for e in (10, 20)]
    assert 1.7 < zoo[1] / zoo[0] <= 2.05  # 2x epochs ~ 2x time (the setup does not scale)
    spec = StitchSpec(a=a, b=b, cut_a="block1", cut_b="block1", seed=44)
    stitch = [estimate_seconds("stitch", StitchSpec(**{**spec.__dict__, "epochs": e}), st).seconds for e in (10, 20)]
    assert 1.2 < stitch[1] / stitch[0] <= 2.05  # collecting activations and scoring A and B do not scale
    one, two = (estimate_seconds("matrix", MatrixSpec(a, b, senders=s, receivers=("fc1", "fc2")), st)
                for s in (("block2",), ("block2", "fc1")))
    assert "2 least-squares cells" in one.basis and "4 least-squares cells" in two.basis
    assert two.seconds > one.seconds
    trained = estimate_seconds("matrix", MatrixSpec(a, b, senders=("block2",), receivers=("fc1", "fc2"),
                                                    mode="trained", epochs=2), st)
    assert trained.seconds > one.seconds and "adapter steps" in trained.basis


def test_lm_estimates_scale_with_steps_and_curves(tmp_path, ticks):
    st = Store(tmp_path / "lm")
    a, b = train_tiny(st, 0), train_tiny(st, 1)
    short, long = (estimate_seconds("lmstitch", LMStitchSpec(a=a, b=b, cut_a=1, steps=n), st).seconds
                   for n in (100, 200))
    assert 1.1 < long / short <= 2.05  # twice the steps; the fixed costs (loading, scoring) do not double
    one, both = (estimate_seconds("lmdepth", DepthSpec(a=a, b=b, heads=h, modes=("stitch",)), st)
                 for h in (("b",), ("a", "b")))
    assert "3 stitches" in one.basis and "6 stitches" in both.basis and both.seconds > 1.5 * one.seconds
    assert estimate_seconds("zoo", tiny_recipe(5), st).seconds > 0
    assert estimate_seconds("zoo", tiny_recipe(5), st).basis.startswith("calibrated: 1 step of gpt")
    st.close()


def _compare(kind: str, spec, st: Store, capsys, monkeypatch) -> tuple[float, float]:
    """(estimate, measured seconds) of one real run; calibrations cleared first.

    Both are this thread's CPU seconds (``time.thread_time``: the calibration's clock and the run's): on one
    torch thread the work runs in this thread, and its CPU time is what a wall clock gives on an idle machine,
    while the wall clock of a machine shared with other tests (and other users) stretches the calibration and
    the run by different amounts."""
    _no_background()  # a page's background calibration (an earlier app test) would slow both down
    est.clear_calibrations()
    with monkeypatch.context() as m:
        _set_clock(m, time.thread_time)
        guess = estimate_seconds(kind, spec, st)
    est.clear_calibrations()  # none timed on this clock is kept
    t0 = time.thread_time()
    run_experiment(kind, spec, st)
    real = time.thread_time() - t0
    with capsys.disabled():
        print(f"\n[estimate] {kind}: estimated {guess.seconds:.2f} s ({guess.basis}), measured {real:.2f} s, "
              f"ratio {guess.seconds / real:.2f}")
    return guess.seconds, real


@pytest.mark.parametrize("kind", ["zoo", "stitch"])
def test_estimate_is_within_3x_of_a_real_run(store, kind, capsys, monkeypatch):
    st, (a, b) = store
    specs = {
        "zoo": lambda seed: ZooRecipe(arch="cnn", seed=seed, epochs=10),
        "stitch": lambda seed: StitchSpec(a=a, b=b, cut_a="block2", cut_b="block2", seed=seed, epochs=10),
    }
    guess, real = _compare(kind, specs[kind](45), st, capsys, monkeypatch)
    assert 1 / 3 <= guess / real <= 3, (guess, real)


def test_a_plan_counts_models_it_trains_first(tmp_path, store):
    fresh = Store(tmp_path / "fresh")
    models = [("zoo", ZooRecipe(seed=0)), ("zoo", ZooRecipe(seed=1))]
    stitch = ("stitch", StitchSpec(a="zoo:cnn-digits-s0", b="zoo:cnn-digits-s1", cut_a="block2", cut_b="block2"))
    assert estimate_seconds(*stitch, fresh) is None  # its models are not trained: nothing to time
    plan = estimate_plan([*models, stitch], fresh)  # untrained copies of the recipes stand in
    assert plan is not None and plan.seconds > 0 and plan.basis.count("calibrated") == 3
    alone = estimate_plan(models, fresh)
    assert plan.seconds > alone.seconds
    st, _ = store  # the session store holds both models and (maybe) the stitch: only what is missing counts
    stored = estimate_plan(models, st)
    assert stored.stored and stored.describe() == "in the store already: opens at once"
    fresh.close()


def test_what_cannot_be_estimated_is_none_never_an_error(store, monkeypatch):
    st, (a, b) = store
    assert estimate_seconds("no-such-kind", ZooRecipe(), st) is None
    assert estimate_seconds("stitch", ZooRecipe(), st) is None  # a spec of another kind
    assert estimate_seconds("stitch", StitchSpec(a="zoo:not-trained", b=b, cut_a="x", cut_b="y"), st) is None
    assert estimate_seconds("stitch", StitchSpec(a=a, b=b, cut_a="nope", cut_b="block1"), st) is None
    assert estimate_seconds("zoo", ZooRecipe(dataset="no-such-data"), st) is None
    assert estimate_seconds("zoo", None, st) is None
    assert estimate_plan([("zoo", ZooRecipe()), ("nope", None)], st) is None

    def broken(*_a, **_k):
        raise RuntimeError("estimator bug")

    monkeypatch.setattr(est, "_one", broken)
    assert estimate_seconds("zoo", ZooRecipe(), st) is None
    assert estimate_plan([("zoo", ZooRecipe())], st) is None


def test_pages_never_wait_for_a_calibration(store):
    st, _ = store
    recipe = ZooRecipe(arch="mlp", seed=47, epochs=2, batch_size=32)  # a batch size not timed yet
    _no_background()
    est.clear_calibrations()
    assert estimate_seconds("zoo", recipe, st, wait=False) is None  # timed in the background meanwhile
    deadline = time.monotonic() + 60
    while est.calibrating():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    ready = estimate_seconds("zoo", recipe, st, wait=False)
    assert ready is not None and ready == estimate_seconds("zoo", recipe, st)  # the same cached calibration
    bad = StitchSpec(a="zoo:not-trained", b="zoo:not-trained", cut_a="x", cut_b="y")
    assert estimate_seconds("stitch", bad, st, wait=False) is None
    while est.calibrating():  # it fails in the background ...
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert estimate_seconds("stitch", bad, st, wait=False) is None and not est.calibrating()  # ... not retried at once


def test_the_page_helper_never_raises(monkeypatch, fresh_app_state):
    import ui

    def broken(*_a, **_k):
        raise RuntimeError("estimator bug")

    monkeypatch.setattr(ui.estimates, "estimate_plan", broken)  # where show_estimate looks it up
    assert ui.show_estimate("zoo", ZooRecipe()) is None
    assert ui.show_plan_estimate([("zoo", ZooRecipe())]) is None
    assert ui.show_estimate("zoo", None) is None


def test_a_page_gets_a_quick_figure_first_then_the_full_one(store, monkeypatch):
    """wait=False: a quick calibration (a handful of examples, a small batch scaled up) gives a provisional
    figure within seconds, while the full timing runs; then the full one replaces it.  A small model is
    timed in full by the quick lane at once: its first figure is final."""
    st, (a, b) = store
    spec = StitchSpec(a=a, b=b, cut_a="block1", cut_b="block1", batch_size=40, epochs=3)  # a batch size not timed
    _no_background()
    est.clear_calibrations()
    deadline = time.monotonic() + 120
    with cal._MEASURING:  # the full lane is held back, and not needed: the digit CNNs are cheap
        while (small := estimate_seconds("stitch", spec, st, wait=False)) is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert not small.provisional and est.calibrations() == 1
    _no_background()
    est.clear_calibrations()
    monkeypatch.setattr(timing, "QUICK_CHEAP_SECONDS", -1.0)  # every model counts as large: a quick figure first
    with cal._MEASURING:  # hold the full timing back: only the quick one can finish
        while (first := estimate_seconds("stitch", spec, st, wait=False)) is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert first.provisional and "first figure" in first.basis and est.calibrating()
        plan = estimate_plan([("stitch", spec)], st, wait=False)
        assert plan is not None and plan.provisional
    while est.calibrating():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    final = estimate_seconds("stitch", spec, st, wait=False)
    assert final is not None and not final.provisional and final == estimate_seconds("stitch", spec, st)
    # a forced quick figure of a tiny model is mostly overhead (1.6 s for 0.3 s seen under load): only its order
    # of magnitude is asked here; on real-sized models bench/estimate_bench.py holds it (ResNet-18s: 1.1x)
    assert final.seconds / 20 < first.seconds < final.seconds * 20


def test_the_newest_calibration_asked_runs_first(monkeypatch):
    """A lane runs what the user looks at now before what they typed on the way (a pair half-typed)."""
    ran: list[str] = []
    gate = __import__("threading").Event()

    def run(key, measure, threads):
        gate.wait(10)
        ran.append(key)

    lane = cal._Lane("test-lane", run)
    with cal._LOCK:
        lane.ask("first", lambda: None, None)
    deadline = time.monotonic() + 10
    while lane._todo:  # "first" is taken: it runs (held at the gate)
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with cal._LOCK:
        for key in ("second", "third"):
            lane.ask(key, lambda: None, None)
    gate.set()
    lane.join(10)
    assert ran[0] == "first" and ran[1:] == ["third", "second"]  # "first" was already running


def test_the_page_counts_the_job_workers_start_up(monkeypatch, fresh_app_state):
    """An estimate on a page includes what is left of the worker's start-up, said in its basis."""
    import ui.estimates as ue

    class Runner:
        cpu_threads = 1

        def __init__(self, startup: float) -> None:
            self.startup = startup

        def startup_seconds(self) -> float:
            return self.startup

    run = Estimate(5.0, 2.5, 10.0, "calibrated")
    monkeypatch.setattr(ue, "get_runner", lambda: Runner(12.0))
    with_startup = ue._with_startup(run)
    assert with_startup.seconds == 17.0 and "job worker to start" in with_startup.basis
    monkeypatch.setattr(ue, "get_runner", lambda: Runner(0.0))
    assert ue._with_startup(run) == run
    stored = Estimate(0.0, 0.0, 0.0, "in the store", stored=True)
    assert ue._with_startup(stored) is stored


def test_a_cold_cluster_adds_its_workers_start_up(monkeypatch, fresh_app_state):
    """Settings on Ray: until a job has run on the cluster, its workers' start-up is part of the estimate."""
    import ui.estimates as ue

    class Runner:
        def __init__(self, warm: bool) -> None:
            self.warm = warm

        def cluster_warm(self) -> bool:
            return self.warm

    run = Estimate(2.0, 1.0, 4.0, "calibrated")
    monkeypatch.setattr(ue, "get_runner", lambda: Runner(False))
    cold = ue._with_cluster_startup(run)
    assert cold.seconds == 2.0 + ue.CLUSTER_STARTUP_SECONDS and "cluster's workers to start" in cold.basis
    monkeypatch.setattr(ue, "get_runner", lambda: Runner(True))
    assert ue._with_cluster_startup(run) == run


def test_full_calibrations_wait_while_a_job_runs(monkeypatch):
    """A full timing beside a running job would slow the job and skew the figure: the full lane waits until
    the runner says no job runs; the quick lane does not wait (a first figure still comes)."""
    ran: list[str] = []
    running = __import__("threading").Event()
    running.set()
    release = est.yield_to(running.is_set)
    try:
        quick = cal._Lane("test-quick", lambda k, m, t: ran.append(f"quick {k}"))
        full = cal._Lane("test-full", lambda k, m, t: ran.append(f"full {k}"), after=quick)
        with cal._LOCK:
            quick.ask("pair", lambda: None, None)
            full.ask("pair", lambda: None, None)
        quick.join(10)
        time.sleep(0.3)
        assert ran == ["quick pair"] and full.busy_now()  # the job still runs: the full timing waits
        running.clear()
        full.join(10)
        assert ran == ["quick pair", "full pair"]
    finally:
        release()
    assert running.is_set not in cal._BUSY_CHECKS


def test_a_full_timing_under_way_stops_at_its_next_step_when_a_job_starts_and_is_done_after_it():
    """A full timing that began before Launch does not run to its end beside the job (12 s of a 27 s preset
    seen): its next timed section gives way, and the full lane times it again once no job runs."""
    running = threading.Event()
    sections: list[str] = []
    key = ("test-defer", time.monotonic())

    def measure() -> float:
        est.timed(lambda: sections.append("first"))
        if len(sections) == 1:
            running.set()  # a run is launched between the first two sections
        est.timed(lambda: sections.append("second"))
        return 1.0

    release = est.yield_to(running.is_set)
    try:
        cal._calibrate(key, measure, None, is_quick=False)
        assert sections == ["first"] and key not in cal._CACHE and key in cal._DEFERRED
        assert cal._FULL_LANE.busy_now()  # queued again, waiting for the job
        running.clear()
        cal._FULL_LANE.join(10)
        assert sections == ["first", "first", "second"] and cal._CACHE[key] == 1.0 and key not in cal._DEFERRED
    finally:
        release()
        with cal._LOCK:
            cal._CACHE.pop(key, None)


def test_a_job_runner_holds_full_calibrations_back_while_it_runs_a_job(tmp_path):
    from stitchcore.jobs import JobRunner

    with Store(tmp_path / "s") as st, JobRunner(st, devices=["cpu"]) as runner:
        assert len(cal._BUSY_CHECKS) >= 1 and not cal._jobs_busy()
    assert not cal._jobs_busy() and all(getattr(c, "__self__", None) is not runner for c in cal._BUSY_CHECKS)


def test_a_converged_lm_stitch_is_timed_at_its_expected_stop_not_its_cap(tmp_path):
    from stitchcore.experiments.lm.estimate import STOP_PRIOR_CHECKS, expected_steps

    st = Store(tmp_path / "stops")
    spec = LMStitchSpec(a="zoo:a", b="zoo:b", cut_a=1)  # until converged, a 2,000-step cap
    n, words = expected_steps(spec, st)  # nothing stored to learn from: a stop after a few stalled checks
    assert n == STOP_PRIOR_CHECKS * spec.patience * spec.check_every < spec.steps and "at most 2,000" in words
    assert expected_steps(LMStitchSpec(a="zoo:a", b="zoo:b", cut_a=1, until="steps"), st) == (2000, "2,000 steps")
    for i, stops in enumerate(([300], [650, 400], [9999])):
        rule = {"check_every": spec.check_every, "patience": spec.patience, "tol": spec.tol if i < 2 else 0.5}
        run = f"{i:016x}"
        st.begin(run, "lmdepth", {"a": "x", **rule})
        st.finish(run, {"points": [{"held_out": {"stopped_at": s}} for s in stops]})
    n, words = expected_steps(spec, st)  # the median of the stops stored under the same rule (not the third run's)
    assert n == 400 and "3 stored converged stitches" in words
