"""One live owner per run: waiting, --no-wait, `runs cancel`, Ctrl-C, kill -9, the app and the CLI on one spec,
and two machines on one store (issue: trustworthy under real use, items 2 to 4).

The CLI runs as real subprocesses on a temporary store; "the app" is a JobRunner in this process, as in the app.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import stitchcore.store.results as store_mod
from stitchcore.errors import RunBusy, StoreError
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.jobs import JobRunner
from stitchcore.store.results import Store, run_id_for

ROOT = Path(__file__).resolve().parents[1]
LONG = ["--arch", "mlp", "--epochs", "3000"]  # over a minute on one core: stopped long before it ends


def _cli(store: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "stitchcore", *args, "--store", str(store)]


def _popen(store: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(_cli(store, *args), cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _zoo_id(*args: str) -> str:
    """The run id `zoo train ARGS` makes (the recipe as the CLI builds it)."""
    kw = {"arch": "mlp", "epochs": 20}
    for flag, value in zip(args[::2], args[1::2]):
        kw[flag.lstrip("-").replace("-", "_")] = int(value) if value.isdigit() else value
    return run_id_for("zoo", ZooRecipe(**kw).to_dict())


def _wait_status(store_dir: Path, run_id: str, wanted: set[str], timeout: float = 120.0) -> str:
    """Poll a fresh Store until the run's status is one of ``wanted`` (after it has logged a step when running)."""
    deadline = time.monotonic() + timeout
    with Store(store_dir) as store:
        while time.monotonic() < deadline:
            rec = store.lookup(run_id)
            if rec is not None and rec.status in wanted and (rec.status != "running" or store.series(run_id)):
                return rec.status
            time.sleep(0.2)
    raise AssertionError(f"run {run_id} never became {wanted}")


def _finish(proc: subprocess.Popen, timeout: float = 180.0) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def test_second_cli_waits_for_the_first_and_prints_its_result(tmp_path):
    args = ("zoo", "train", "--arch", "mlp", "--epochs", "120", "--seed", "3", "--json", "--quiet")
    run_id = _zoo_id("--epochs", "120", "--seed", "3")
    first = _popen(tmp_path, *args)
    try:
        assert _wait_status(tmp_path, run_id, {"running"}) == "running"
        second = _popen(tmp_path, *args)
        code2, out2, err2 = _finish(second)
        code1, out1, err1 = _finish(first)
    finally:
        first.kill()
    assert (code1, code2) == (0, 0), (err1, err2)
    one, two = json.loads(out1), json.loads(out2)
    assert one["run_id"] == two["run_id"] == run_id
    assert one["cached"] is False and two["cached"] is True, (one["elapsed"], two["elapsed"], one["seconds"], two["seconds"], one["accuracy"], two["accuracy"])  # trained once, by the first
    assert two["accuracy"] == one["accuracy"]
    with Store(tmp_path) as store:
        assert store.lookup(run_id).status == "done"


def _in_process(store: Path, capsys, *args: str) -> subprocess.CompletedProcess:
    """``_cli``'s command through ``main`` in this process (not the run's owner either): a process less to start."""
    from stitchcore.cli.main import main

    capsys.readouterr()
    code = main([*args, "--store", str(store)])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def test_runs_cancel_stops_a_cli_run_in_another_process(tmp_path, capsys):
    """The run trains in a child process; --no-wait and the second cancel are asked from this one (the shell's
    --no-wait and cancel as processes: test_the_cli_waits_for_the_apps_run_and_cancels_it_from_the_shell)."""
    run_id = _zoo_id("--epochs", "3000", "--seed", "4")
    proc = _popen(tmp_path, "zoo", "train", *LONG, "--seed", "4", "--quiet")
    try:
        _wait_status(tmp_path, run_id, {"running"})
        busy = _in_process(tmp_path, capsys, "zoo", "train", *LONG, "--seed", "4", "--no-wait")
        assert busy.returncode == 3, busy.stderr
        lines = busy.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: run {run_id} is running in process ")
        assert f"runs cancel {run_id}" in lines[0]
        cancel = subprocess.run(_cli(tmp_path, "runs", "cancel", run_id), cwd=ROOT, capture_output=True, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120, check=False)
        code, _out, err = _finish(proc)
    finally:
        proc.kill()
    assert cancel.returncode == 0, cancel.stderr
    assert cancel.stdout.strip() == f"{run_id}: cancelled"
    assert code == 130 and "Traceback" not in err
    with Store(tmp_path) as store:
        rec = store.lookup(run_id)
    assert rec.status == "cancelled"
    again = _in_process(tmp_path, capsys, "runs", "cancel", run_id)
    assert again.returncode == 2 and "nothing to cancel" in again.stderr


def test_ctrl_c_stores_cancelled_and_prints_one_line(tmp_path):
    run_id = _zoo_id("--epochs", "3000", "--seed", "5")
    proc = _popen(tmp_path, "zoo", "train", *LONG, "--seed", "5")
    try:
        _wait_status(tmp_path, run_id, {"running"})
        proc.send_signal(signal.SIGINT)
        code, _out, err = _finish(proc)
    finally:
        proc.kill()
    assert code == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    last = [line for line in err.replace("\r", "\n").splitlines() if line.strip()][-1]
    assert last.startswith("cancelled (Ctrl-C)")
    with Store(tmp_path) as store:
        rec = store.lookup(run_id)
    assert (rec.status, rec.error) == ("cancelled", "cancelled with Ctrl-C")


def test_kill_9_leaves_a_row_the_next_process_marks_interrupted_and_reruns(tmp_path):
    run_id = _zoo_id("--epochs", "3000", "--seed", "6")
    proc = _popen(tmp_path, "zoo", "train", *LONG, "--seed", "6", "--quiet")
    try:
        _wait_status(tmp_path, run_id, {"running"})
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    with Store(tmp_path) as store:
        assert store.lookup(run_id).status == "running"  # nobody has looked since
        assert store.live_owner(run_id) is None  # its process is gone
        assert store.mark_interrupted() == 1
        rec = store.lookup(run_id)
        assert rec.status == "interrupted" and "stopped while the run was running" in rec.error
        assert store.integrity_check() == []
        rec = store.begin(run_id, "zoo", rec.spec, label=rec.label)  # the next run of it starts clean
        assert rec.status == "running" and store.series(run_id) == {}


def test_the_app_waits_for_a_cli_run_of_the_same_spec(tmp_path):
    """The app's job reaching a spec the CLI is training waits and shows the CLI's result; nothing failed."""
    run_id = _zoo_id("--epochs", "600", "--seed", "7")
    proc = _popen(tmp_path, "zoo", "train", "--arch", "mlp", "--epochs", "600", "--seed", "7", "--quiet", "--json")
    try:
        _wait_status(tmp_path, run_id, {"running"})
        store = Store(tmp_path)
        with JobRunner(store, devices=["cpu"]) as runner:  # its start must not mark the CLI's live row
            assert store.lookup(run_id).status == "running"
            job = runner.submit("zoo", ZooRecipe(arch="mlp", epochs=600, seed=7))
            assert job.id == run_id and job.state in ("queued", "running")
            deadline = time.monotonic() + 60
            while "waiting for process" not in (snap := runner.get(run_id)).message and not snap.is_final:
                assert time.monotonic() < deadline, snap
                time.sleep(0.1)
            assert not snap.is_final and f":{proc.pid}, which is running it" in snap.message
            snap = runner.wait(run_id, timeout=240)
        code, out, err = _finish(proc)
    finally:
        proc.kill()
    assert code == 0, err
    assert snap.state == "done" and snap.cached, snap.error
    assert snap.summary["accuracy"] == json.loads(out)["accuracy"]
    rec = store.lookup(run_id)
    assert rec.status == "done" and rec.error is None
    store.close()


def test_the_cli_waits_for_the_apps_run_and_cancels_it_from_the_shell(tmp_path):
    store = Store(tmp_path)
    with JobRunner(store, devices=["cpu"], cpu_threads=1) as runner:
        job = runner.submit("zoo", ZooRecipe(arch="mlp", epochs=3000, seed=8))
        _wait_status(tmp_path, job.id, {"running"})
        busy = subprocess.run(_cli(tmp_path, "zoo", "train", *LONG, "--seed", "8", "--no-wait"), cwd=ROOT,
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120,
                              check=False)
        assert busy.returncode == 3 and f"process {store_mod._HOST}:{os.getpid()}" in busy.stderr
        cancel = subprocess.run(_cli(tmp_path, "runs", "cancel", job.id), cwd=ROOT, capture_output=True, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120, check=False)
        assert cancel.returncode == 0, cancel.stderr
        snap = runner.wait(job.id, timeout=60)
    assert snap.state == "cancelled"
    assert store.lookup(job.id).status == "cancelled"
    store.close()


def _row(store: Store, run_id: str, owner: str, heartbeat: float | None, status: str = "running") -> None:
    store.begin(run_id, "zoo", {"seed": run_id})
    with store._tx() as conn:
        conn.execute("UPDATE runs SET owner = ?, heartbeat = ?, status = ? WHERE id = ?",
                     (owner, heartbeat, status, run_id))
    store._disown(run_id)


def test_two_machines_on_one_store_keep_each_others_live_runs(tmp_path):
    store = Store(tmp_path)
    now = time.time()
    _row(store, "livehere", "other-machine:4242", now)  # stamps its heartbeat: alive
    _row(store, "silent", "other-machine:4243", now - store_mod.STALE_SECONDS - 1)  # stopped stamping
    _row(store, "oldrow", "other-machine:4244", None)  # written before heartbeats: nobody can tell it lives
    _row(store, "queuedthere", "other-machine:4245", now, status="queued")
    assert store.mark_interrupted() == 2
    status = {r.id: r.status for r in store.list_runs()}
    assert status == {"livehere": "running", "silent": "interrupted", "oldrow": "interrupted",
                      "queuedthere": "queued"}
    assert store.live_owner("livehere") == "other-machine:4242"
    with pytest.raises(RunBusy, match="other-machine:4242"):
        store.begin("livehere", "zoo", {"seed": "livehere"})
    with pytest.raises(RunBusy):  # nobody writes over it either
        store.fail("livehere", "boom")
    assert store.request_cancel("livehere") == "asked"
    assert store._query("SELECT cancel_requested IS NOT NULL FROM runs WHERE id = 'livehere'")[0][0] == 1
    store.close()


def test_a_stale_owner_is_taken_over_after_marking_it_interrupted(tmp_path, caplog):
    store = Store(tmp_path)
    _row(store, "stale", "other-machine:1", time.time() - store_mod.STALE_SECONDS - 5)
    with caplog.at_level("WARNING"):
        rec = store.begin("stale", "zoo", {"seed": "stale"})
    assert rec.status == "running" and "other-machine:1 stopped while it was running" in caplog.text
    assert store.live_owner("stale") is None  # it is ours now
    store.close()


def test_runs_cancel_marks_a_run_nobody_runs(tmp_path):
    store = Store(tmp_path)
    _row(store, "orphan", "other-machine:9", None, status="queued")
    assert store.request_cancel("orphan") == "cancelled"
    assert store.lookup("orphan").status == "cancelled"
    with pytest.raises(StoreError, match="nothing to cancel"):
        store.request_cancel("orphan")
    store.close()


def test_a_read_only_store_of_the_first_database_version_still_opens(tmp_path, monkeypatch):
    """Stores written before the heartbeat columns (version 1) open read-only without an upgrade."""
    import sqlite3

    store = Store(tmp_path)
    store.begin("r1", "zoo", {"seed": 1})
    store.finish("r1", {"accuracy": 0.5})
    store.close()
    db = tmp_path / store_mod.DB_NAME
    conn = sqlite3.connect(db)  # back to version 1: no heartbeat columns
    conn.execute("DELETE FROM schema_migrations WHERE version > 1")
    conn.execute("ALTER TABLE runs DROP COLUMN imported")
    conn.execute("ALTER TABLE runs DROP COLUMN imported_from")
    conn.execute("ALTER TABLE runs DROP COLUMN heartbeat")
    conn.execute("ALTER TABLE runs DROP COLUMN cancel_requested")
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    monkeypatch.setattr(store_mod, "_writable", lambda root, db: False)  # stands in for a read-only mount
    ro = Store(tmp_path)
    assert ro.read_only and ro.lookup("r1").summary == {"accuracy": 0.5}
    assert ro.lookup("r1").imported is None and ro.list_runs()[0].imported_from is None  # no such column
    assert ro.live_owner("r1") is None and ro.mark_interrupted() == 0
    ro.close()
    monkeypatch.undo()
    with Store(tmp_path) as rw:  # opened writable once, it is upgraded and keeps its run
        assert rw.lookup_done("r1") is not None
        assert rw._query("SELECT MAX(version) FROM schema_migrations")[0][0] == len(store_mod.MIGRATIONS)


def test_close_waits_for_another_threads_query_instead_of_pulling_its_connection(tmp_path):
    """A background thread (an estimate's calibration, the heartbeat) may be inside a query when a test or
    the app closes the Store: close() waits for it; its next call says the store is closed."""
    import threading

    store = Store(tmp_path)
    store.begin("busy", "zoo", {"seed": 1})
    slow = ("WITH RECURSIVE n(i) AS (SELECT started() UNION ALL SELECT i + 1 FROM n WHERE i < 3000000)"
            " SELECT COUNT(*) FROM n")  # started() runs once the query holds its connection
    seen: list = []
    started = threading.Event()

    def query() -> None:
        conn, _ = store._conn()
        conn.create_function("started", 0, lambda: started.set() or 1)
        seen.append(store._query(slow)[0][0])
        try:
            store.lookup("busy")
        except StoreError as exc:
            seen.append(str(exc))

    worker = threading.Thread(target=query)
    worker.start()
    assert started.wait(60)
    store.close()
    worker.join(60)
    assert seen[0] == 3000000 and "is closed: open a new Store" in seen[1]


def test_a_swallowed_ctrl_c_still_stops_the_run(tmp_path, monkeypatch, capsys):
    """Python drops a KeyboardInterrupt raised inside a finalizer ("Exception ignored in ..."); the flag the CLI's
    SIGINT handler sets beside it stops the run at its next step all the same."""
    from stitchcore.cli import _common
    from stitchcore.cli.main import main

    calls = []

    def progress(self, fraction, message="", metrics=None):  # the handler ran, its KeyboardInterrupt was lost
        calls.append(fraction)
        if len(calls) == 5:
            _common.CTRL_C.ctrl_c()

    monkeypatch.setattr(_common.ProgressBar, "__call__", progress)
    code = main(["zoo", "train", *LONG, "--seed", "7", "--store", str(tmp_path)])
    assert code == 130
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("cancelled (Ctrl-C)")
    with Store(tmp_path) as store:
        rec = store.lookup(_zoo_id("--epochs", "3000", "--seed", "7"))
    assert (rec.status, rec.error) == ("cancelled", "cancelled with Ctrl-C")
