"""The ``ray`` backend on a Ray started in this process (``ray.init`` with this machine's CPUs): the same
cells as the local backend, Stop, and a unit whose worker dies for good."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from tests.ray_helpers import ray_env, unit_pids

from stitchcore.errors import Cancelled
from stitchcore.experiments import run_experiment
from stitchcore.backends import RunOptions
from stitchcore.experiments.matrix import MatrixSpec, failed_pairs, partial_cells, partial_path
from stitchcore.store.results import run_id_for

ray = pytest.importorskip("ray")
RAY = RunOptions("ray")


@pytest.fixture(scope="module")
def local_ray():
    """Ray started here once for the module (through the backend, as a run starts it), stopped after."""
    from stitchcore.backends import ray_backend

    with ray_env():
        ray_backend.connect(None)
        yield ray_backend.local_temp_dir()  # this Ray's temp dir (its workers' raylet names it)
        ray_backend.disconnect()


@pytest.fixture
def store(_trained, tmp_path):
    """The two digit CNNs as first trained (no run of them yet: every run here computes), and their refs."""
    from tests.conftest import copy_store

    from stitchcore.store.results import Store

    _, refs, pristine = _trained
    copy_store(pristine, tmp_path / "store")
    return Store(tmp_path / "store"), refs


def _by_cell(store, run_id):
    return {(c["variant"], c["sender"], c["receiver"]): c for c in partial_cells(store, run_id)}


@pytest.mark.parametrize("mode, controls", [("trained", False), ("closed-form", True), ("proxy", False)])
def test_a_matrix_on_ray_equals_the_local_one(local_ray, store, mode, controls):
    store, refs = store
    spec = MatrixSpec(refs[0], refs[1], mode=mode, epochs=1, max_train=400, max_test=300, seed=5, controls=controls)
    here = run_experiment("matrix", spec, store)
    local = _by_cell(store, here.record.id)
    there = run_experiment("matrix", spec, store, rerun=True, options=RAY)
    assert there.record.id == here.record.id  # the backend is not part of the run's identity
    cells = _by_cell(store, there.record.id)
    assert cells.keys() == local.keys() and len(cells) == 25 * (5 if controls else 1)
    for key, cell in local.items():
        assert cells[key]["skipped_reason"] == cell["skipped_reason"], key
        if cell["accuracy"] is not None:
            assert abs(cells[key]["accuracy"] - cell["accuracy"]) <= 1e-4, key
            assert abs(cells[key]["residual"] - cell["residual"]) <= 1e-4, key
        for what in ("r2", "cka"):  # the fits' proxy (closed form and proxy: every joinable cell has one)
            assert (cell.get(what) is None) == (cells[key].get(what) is None), key
            assert cell.get(what) is None or abs(cells[key][what] - cell[what]) <= 1e-5, key
    if mode != "trained":
        assert sum(c.get("r2") is not None for (variant, _, _), c in cells.items() if variant == "trained") == 19
    s = there.record.summary
    assert _grids_close(s["values"], here.record.summary["values"])
    assert s["backend"]["name"] == "ray" and len(s["nodes"]) == 1
    (node,) = s["nodes"].values()
    assert node["cells"] == len(cells) and node["devices"] == ["cpu"]
    assert all(c["node"] in s["nodes"] and c["device"] == "cpu" for c in cells.values())
    assert "backend" not in here.record.summary and "node" not in next(iter(local.values()))


def _grids_close(a, b):
    return all((x is None and y is None) or abs(x - y) <= 1e-4 for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def test_stop_on_ray_keeps_the_finished_cells_and_a_rerun_resumes(local_ray, store):
    store, refs = store
    spec = MatrixSpec(refs[0], refs[1], mode="trained", epochs=4, max_train=400, max_test=300, seed=7)
    cancel = threading.Event()
    seen = []

    def progress(fraction, message, metrics):
        if "cell_acc" in metrics:
            seen.append(metrics["cell_acc"])
            cancel.set()  # Stop once the first cells are back

    with pytest.raises(Cancelled):
        run_experiment("matrix", spec, store, progress=progress, cancel=cancel, options=RAY)
    rec = store.lookup(run_id_for("matrix", spec.to_dict()))
    assert rec.status == "cancelled"
    kept = json.loads(partial_path(store, rec.id).read_text())["cells"]
    assert 1 <= len(kept) < 25 and len(partial_cells(store, rec.id)) == len(kept)
    deadline = time.time() + 20  # nothing is left running on the cluster
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources()["CPU"]:
        assert time.time() < deadline, ray.available_resources()
        time.sleep(0.2)

    out = run_experiment("matrix", spec, store, options=RAY)
    assert out.record.status == "done" and not out.cached
    cells = partial_cells(store, out.record.id)
    assert len(cells) == 25
    before = {(c["sender"], c["receiver"]): c["accuracy"] for c in kept}
    assert all(c["accuracy"] == before[c["sender"], c["receiver"]]
               for c in cells if (c["sender"], c["receiver"]) in before)  # kept, not recomputed


def test_a_unit_whose_worker_dies_for_good_is_stored_failed_and_the_rest_complete(local_ray, store, monkeypatch,
                                                                                  fresh_app_state):
    store, refs = store
    spec = MatrixSpec(refs[0], refs[1], mode="trained", epochs=60, max_train=400, max_test=300, seed=9,
                      receivers=("fc1", "fc2"))  # fmt: skip
    killed: list[int] = []

    def progress(fraction, message, metrics):
        if not killed and "into fc1" in message:  # the fc1 unit has started training: kill its worker
            pids = unit_pids("ray::stitchlab trained|fc1", local_ray)
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            killed.extend(pids or [0])

    out = run_experiment("matrix", spec, store, progress=progress,
                         options=RunOptions("ray", max_retries=0))  # fmt: skip
    assert killed and killed != [0], "the fc1 unit was not running when the first unit reported"
    s = out.record.summary
    assert out.record.status == "done"
    failed = failed_pairs(s, partial_cells(store, out.record.id))
    assert {r for _, r in failed} == {"fc1"} and len(failed) == 5
    assert all("WorkerCrashedError" in reason or "died" in reason for reason in failed.values()), failed
    assert all(v is not None for v in [row[1] for row in s["values"]])  # fc2 completed
    assert partial_path(store, out.record.id).exists()  # so a re-run retries only the failed cells

    # the run's view says so and its "Retry the failed parts" computes only those (here on the local backend)
    from streamlit.testing.v1 import AppTest
    from tests.conftest import ROOT

    import ui

    monkeypatch.setenv("STITCHLAB_STORE", str(store.root))
    view = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    view.query_params["run"] = out.record.id
    view.run().switch_page("views/results.py").run()
    assert not view.exception
    warning = next(w.value for w in view.warning if "failed on the cluster" in w.value)
    assert warning.startswith("5 part(s) of this run failed on the cluster") and "fc1" in warning, warning
    assert any("= failed on the cluster: Retry the failed parts" in c.value for c in view.caption)  # the blanks
    assert all(c.get("node") for c in partial_cells(store, out.record.id) if c["receiver"] == "fc2")  # from Ray
    view.button(key=f"results-retry-{out.record.id}").click().run()
    assert ui.get_runner().wait(out.record.id, timeout=180).state == "done"
    view.run()
    assert not view.exception and not any("failed on the cluster" in w.value for w in view.warning)
    again = store.lookup(out.record.id)
    assert "failed" not in again.summary
    assert all(v is not None for row in again.summary["values"] for v in row)
    by_receiver = {r: [bool(c.get("node")) for c in partial_cells(store, out.record.id) if c["receiver"] == r]
                   for r in ("fc1", "fc2")}  # fmt: skip
    assert by_receiver == {"fc1": [False] * 5, "fc2": [True] * 5}  # fc2 kept from Ray, fc1 computed here


def test_an_assembly_on_ray_equals_the_local_one(local_ray, store):
    from stitchcore.experiments.assemble import AssembleSpec, assembled_cells

    store, refs = store
    spec = AssembleSpec(refs[1], refs[0], senders=("block1", "fc1"), receivers=("block2", "fc1"), kinds=("linear",),
                        resamples=("bilinear",), epochs=2, max_train=400, max_test=300, seed=3)  # fmt: skip
    here = run_experiment("assemble", spec, store).record
    there = run_experiment("assemble", spec, store, rerun=True, options=RAY).record
    local, remote = assembled_cells(store, here.id), assembled_cells(store, there.id)
    assert [(c["sender"], c["receiver"], c["recipe"]) for c in remote] == [
        (c["sender"], c["receiver"], c["recipe"]) for c in local]  # in plan order, whatever order they came back
    for a, b in zip(local, remote):
        assert a["skipped_reason"] == b["skipped_reason"]
        if a["accuracy"] is not None:
            assert abs(a["accuracy"] - b["accuracy"]) <= 1e-4 and a["flops"] == b["flops"]
    assert there.summary["backend"]["name"] == "ray" and len(there.summary["nodes"]) == 1
    assert all(c.get("node") for c in remote if c["accuracy"] is not None)


def test_a_sweep_on_ray_equals_the_local_one(local_ray, store):
    from stitchcore.experiments.sweep import SweepSpec

    store, refs = store
    spec = SweepSpec(refs[0], refs[1], positions=("block1", "block2", "fc1"), epochs=1, max_train=300, max_test=200,
                     control=True, control_seeds=1, simplicity=False)  # fmt: skip
    here = run_experiment("sweep", spec, store).record.summary
    there = run_experiment("sweep", spec, store, rerun=True, options=RAY).record.summary
    assert [r["position"] for r in there["rows"]] == [r["position"] for r in here["rows"]] == ["block1", "block2", "fc1"]
    for a, b in zip(here["rows"], there["rows"]):
        assert a["metrics"] == pytest.approx(b["metrics"], abs=1e-4)
        assert a["control"][0]["metrics"] == pytest.approx(b["control"][0]["metrics"], abs=1e-4)
        assert b["node"] in there["nodes"] and "node" not in a


def test_an_lm_depth_sweep_on_ray_equals_the_local_one(local_ray, store):
    from stitchcore.experiments.lm import DepthSpec
    from tests.lm_helpers import train_tiny

    store, _ = store
    a, b = train_tiny(store, 0), train_tiny(store, 1)
    spec = DepthSpec(a=a, b=b, steps=2, heatmap=True, eval_windows=8, sample_tokens=12)
    here = run_experiment("lmdepth", spec, store).record.summary
    there = run_experiment("lmdepth", spec, store, rerun=True, options=RAY).record
    s = there.summary
    key = lambda p: (p["mode"], p["head"], p["split"])  # noqa: E731
    assert [key(p) for p in s["points"]] == [key(p) for p in here["points"]] and len(s["points"]) == 12
    for p, q in zip(here["points"], s["points"]):
        assert abs(p["loss_penalty"] - q["loss_penalty"]) <= 1e-4, key(p)
        assert q["loss_penalty_ci"] == pytest.approx(p["loss_penalty_ci"], abs=1e-4), key(p)  # base windows shipped
    flat = lambda h: [v for row in h["heatmap"]["values"] for v in row]  # noqa: E731
    assert flat(s) == pytest.approx(flat(here), abs=1e-4) and None not in flat(s)
    assert s["samples"].keys() == here["samples"].keys()
    assert store.series(there.id)["loss"] and s["backend"]["name"] == "ray"


def test_a_runner_knows_when_its_cluster_is_warm(local_ray, store):
    """JobRunner.cluster_warm: False until a job has run its units on Ray (the page then stops adding the
    workers' start-up to its estimates), True after; a local job does not make it warm."""
    from stitchcore.jobs import JobRunner

    store, refs = store
    spec = MatrixSpec(refs[0], refs[1], senders=("block1",), receivers=("block1",), seed=8)
    with JobRunner(store, devices=["cpu"], cpu_threads=1, options=RunOptions("local")) as runner:
        assert runner.wait(runner.submit("matrix", spec).id, timeout=120).state == "done"
        assert not runner.cluster_warm()
        runner.set_options(RAY, save=False)
        assert runner.wait(runner.submit("matrix", spec, rerun=True).id, timeout=300).state == "done"
        assert runner.cluster_warm()
