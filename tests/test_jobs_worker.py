"""Jobs in a worker process (the app's runner): results, live points, Stop, a killed worker, thread settings."""

from __future__ import annotations

import os
import signal
import time

import pytest

from stitchcore.errors import StitchError
from stitchcore.jobs.worker import THREADS_ENV
from stitchcore.jobs import JobRunner
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.store.results import Store


def _until(runner: JobRunner, job_id: str, test, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while not test(snap := runner.get(job_id)):
        assert time.monotonic() < deadline, snap
        time.sleep(0.1)
    return snap


@pytest.fixture(scope="module")
def proc_runner(tmp_path_factory):
    """One process-mode runner for the module: its worker starts once (spawn costs a few seconds)."""
    store = Store(tmp_path_factory.mktemp("proc_store"))
    runner = JobRunner(store, devices=["cpu"], cpu_threads=1, isolation="process")
    yield runner
    runner.shutdown()
    assert all(w.pid is None for w in runner._workers)  # no child left behind
    store.close()


def test_a_job_runs_in_a_child_process_with_live_points_equal_to_the_store(proc_runner):
    job = proc_runner.submit("zoo", ZooRecipe(arch="mlp", epochs=15, seed=11))
    snap = proc_runner.wait(job.id, timeout=180)
    assert snap.state == "done" and not snap.cached, snap.error
    worker = proc_runner._workers[0]
    assert worker.pid not in (None, os.getpid())  # it ran elsewhere, and the child stays for the next job
    assert snap.metrics == proc_runner.store.series(job.id)  # the live curve is the stored one, point for point
    assert len(snap.metrics["loss"]) > 10 and snap.summary["accuracy"] > 0.8
    rec = proc_runner.store.lookup(job.id)
    assert rec.status == "done" and rec.summary == snap.summary


def test_the_same_spec_in_thread_mode_gives_the_same_run(proc_runner, tmp_path):
    recipe = ZooRecipe(arch="mlp", epochs=15, seed=11)
    with Store(tmp_path) as store, JobRunner(store, devices=["cpu"], cpu_threads=1) as threads:
        snap = threads.wait(threads.submit("zoo", recipe).id, timeout=180)
    there = proc_runner.get(snap.id)
    assert there.state == "done" and snap.summary["accuracy"] == there.summary["accuracy"]


def test_stop_reaches_the_child_and_the_run_is_stored_cancelled(proc_runner):
    job = proc_runner.submit("zoo", ZooRecipe(arch="mlp", epochs=3000, seed=12))
    _until(proc_runner, job.id, lambda s: s.metrics.get("loss"))
    assert proc_runner.cancel(job.id)
    snap = proc_runner.wait(job.id, timeout=60)
    assert (snap.state, snap.error) == ("cancelled", "cancelled by the user")
    assert proc_runner.store.lookup(job.id).status == "cancelled"


def test_a_killed_worker_fails_its_job_and_the_next_job_gets_a_fresh_one(proc_runner):
    job = proc_runner.submit("zoo", ZooRecipe(arch="mlp", epochs=3000, seed=13))
    _until(proc_runner, job.id, lambda s: s.metrics.get("loss"))
    old_pid = proc_runner._workers[0].pid
    os.kill(old_pid, signal.SIGKILL)
    snap = proc_runner.wait(job.id, timeout=60)
    assert snap.state == "failed" and "worker process died (exit code -9)" in snap.error
    rec = proc_runner.store.lookup(job.id)
    assert rec.status == "failed" and "died" in rec.error  # not left running
    nxt = proc_runner.wait(proc_runner.submit("zoo", ZooRecipe(arch="mlp", epochs=5, seed=14)).id, timeout=180)
    assert nxt.state == "done" and proc_runner._workers[0].pid not in (None, old_pid)


def test_job_threads_come_from_the_environment_or_leave_a_core(monkeypatch, tmp_path):
    with Store(tmp_path) as store:
        monkeypatch.setenv(THREADS_ENV, "3")
        runner = JobRunner(store, devices=["cpu"], isolation="process")
        assert runner.cpu_threads == 3
        runner.shutdown()
        for bad in ("0", "two", "-1"):
            monkeypatch.setenv(THREADS_ENV, bad)
            with pytest.raises(StitchError, match=THREADS_ENV):
                JobRunner(store, devices=["cpu"])
        monkeypatch.delenv(THREADS_ENV)
        runner = JobRunner(store, devices=["cpu"], isolation="process")
        assert runner.cpu_threads == max(1, (os.cpu_count() or 1) - 1)
        runner.shutdown()
        with pytest.raises(StitchError, match="isolation"):
            JobRunner(store, isolation="fork")


def test_a_warm_runner_starts_its_worker_before_the_first_job(tmp_path):
    """warm=True (the app): the worker process starts with the runner; startup_seconds counts down to 0 and the
    first job runs in that same, already warm, child."""
    from stitchcore.jobs.worker import WorkerProcess

    with Store(tmp_path / "cold") as store:
        cold = JobRunner(store, devices=["cpu"], cpu_threads=1, isolation="process")
        try:
            time.sleep(0.5)
            assert cold.startup_seconds() == WorkerProcess.expected_startup > 0  # no child until the first job
            assert all(w.pid is None for w in cold._workers)
        finally:
            cold.shutdown()
    with Store(tmp_path / "warm") as store:
        runner = JobRunner(store, devices=["cpu"], cpu_threads=1, isolation="process", warm=True)
        try:
            assert runner.startup_seconds() > 0  # importing torch and the kinds takes seconds
            deadline = time.monotonic() + 180
            while runner.startup_seconds() > 0:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            pid = runner._workers[0].pid
            assert pid is not None and 0 < WorkerProcess.expected_startup < 180  # measured, for later estimates
            snap = runner.wait(runner.submit("zoo", ZooRecipe(arch="mlp", epochs=1, seed=16)).id, timeout=180)
            assert snap.state == "done" and runner._workers[0].pid == pid
        finally:
            runner.shutdown()


def test_a_worker_started_from_a_page_does_not_run_the_page_s_script_again(tmp_path, monkeypatch):
    """Streamlit runs a page with its script as ``__main__``; a spawned child runs its parent's ``__main__``
    file first, so the worker ran the whole app again (bare-mode warnings in every e2e server log)."""
    import sys
    import types

    from stitchcore.jobs.worker import WorkerProcess

    marker = tmp_path / "script-ran"
    script = tmp_path / "page_script.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    page_main = types.ModuleType("__main__")
    page_main.__file__ = str(script)  # what Streamlit's script runner puts there: a file, no __spec__
    monkeypatch.setitem(sys.modules, "__main__", page_main)
    with Store(tmp_path / "s") as store:
        runner = JobRunner(store, devices=["cpu"], cpu_threads=1, isolation="process", warm=True)
        try:
            deadline = time.monotonic() + 180
            while runner.startup_seconds() > 0:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            assert runner._workers[0].pid is not None
        finally:
            runner.shutdown()
    assert sys.modules["__main__"] is page_main  # the page's module is back
    assert not marker.exists()
    assert WorkerProcess.expected_startup > 0


SERVER_KILLED = """
import os, sys, time
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.jobs import JobRunner
from stitchcore.store.results import Store

store = Store(sys.argv[1])
runner = JobRunner(store, devices=["cpu"], cpu_threads=1, isolation="process")
job = runner.submit("zoo", ZooRecipe(arch="mlp", epochs=3000, seed=15))
while not (runner.get(job.id).metrics.get("loss")):
    time.sleep(0.1)
print(job.id, runner._workers[0].pid, flush=True)
os._exit(0)  # the server goes away mid-run, as a killed one does: its worker's pipe closes
"""


def test_a_run_whose_server_goes_away_is_recorded_interrupted_not_cancelled(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", SERVER_KILLED, str(tmp_path)], capture_output=True, text=True,
                         timeout=180, cwd=os.path.dirname(os.path.dirname(__file__)))  # fmt: skip
    run_id, worker_pid = out.stdout.split()
    with Store(tmp_path) as store:
        deadline = time.monotonic() + 60
        while store.lookup(run_id).status == "running":  # the orphaned worker notices and stops the run
            assert time.monotonic() < deadline, "the orphaned worker left its run running"
            time.sleep(0.2)
        rec = store.lookup(run_id)
    assert rec.status == "interrupted" and rec.error.startswith("interrupted: the server that ran it stopped"), rec
    deadline = time.monotonic() + 30
    while _alive(int(worker_pid)):  # and the worker exits
        assert time.monotonic() < deadline, "the orphaned worker is still alive"
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie (exited, not reaped by its dead parent) counts as gone
        return f.read().split()[2] != "Z"
