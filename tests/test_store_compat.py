"""A store written before the restructure keeps working: same run ids, cache hits, readable results, shown.

``tests/fixtures/store_v1`` was written once by the old code (``tests/fixtures/make_store_v1.py``): one small
run of every kind.  Every test works on a copy; the committed fixture is never opened for writing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from stitchcore.data.images import load_dataset
from stitchcore.experiments import run_experiment, spec_from_record
from stitchcore.experiments.lm import labelled_points, partial_points
from stitchcore.experiments.matrix import cell_grid, partial_cells
from stitchcore.experiments.sweep import partial_positions
from stitchcore.models.sources import load_model
from stitchcore.stitching.evaluate import evaluate_batches
from stitchcore.store.results import Store, run_id_for
from tests.conftest import ROOT, copy_store

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "store_v1"
RUNS = {  # the fixture's runs: id -> kind (the ids are the old code's hashes; they must not change)
    "3a5c8fd66da321ff": "zoo",  # zoo:cnn-digits-s0-3a5c8f
    "d927a0202342c09e": "zoo",  # zoo:cnn-digits-s1-d927a0
    "0a297261b06a2f0f": "zoo",  # zoo:gpt-pydoc-s0-adamw-0a2972
    "0b20756a6d0c1780": "zoo",  # zoo:gpt-pydoc-s1-adamw-0b2075
    "6d9f490702433fc1": "stitch",
    "948efef379ab0882": "matrix",
    "85d6995881b3ee60": "similarity",
    "2daff2acaae2878b": "sweep",
    "7b32b03feebed0fd": "merge",
    "70492b7db4bce988": "lmdepth",
}
ZOO = [rid for rid, kind in RUNS.items() if kind == "zoo"]
KIND_OF = {kind: rid for rid, kind in RUNS.items()}  # one run per kind (the last zoo run for zoo)


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("compat") / "store"
    copy_store(FIXTURE, root)
    return root


@pytest.fixture(scope="module")
def store(store_dir):
    with Store(store_dir) as s:
        yield s


def test_every_run_is_listed_done_and_intact(store):
    runs = store.list_runs()
    assert {r.id: r.kind for r in runs} == RUNS
    assert all(r.status == "done" and r.summary for r in runs)
    assert store.integrity_check() == []


@pytest.mark.parametrize("run_id", RUNS)
def test_spec_rebuilds_with_the_same_id_and_is_a_cache_hit(store, run_id):
    rec = store.lookup(run_id)
    spec = spec_from_record(rec)
    assert spec.to_dict() == rec.spec
    assert run_id_for(rec.kind, spec.to_dict()) == rec.id
    out = run_experiment(rec.kind, spec, store)  # a miss would train: the ids would have moved
    assert out.cached is True and out.record.id == rec.id and out.record.summary == rec.summary


def test_matrix_cells_read_back(store):
    rid = KIND_OF["matrix"]
    s = store.lookup(rid).summary
    cells = partial_cells(store, rid)
    assert len(cells) == len(s["senders"]) * len(s["receivers"]) == 4
    assert cell_grid(cells, s["senders"], s["receivers"]) == s["values"]
    assert cell_grid(cells, s["senders"], s["receivers"], field="penalty") == s["penalty"]


def test_sweep_positions_read_back(store):
    rid = KIND_OF["sweep"]
    s = store.lookup(rid).summary
    part = partial_positions(store, rid)
    assert part["positions"] == s["positions"] == part["all_positions"] == ["block1", "fc1"]
    assert part["stitched"] == s["stitched"] and part["reference"] == s["reference"]
    assert part["metrics"] == s["metrics"] and part["per_class"] == s["per_class"]


def test_depth_points_read_back_from_the_series(store):
    rid = KIND_OF["lmdepth"]
    s = store.lookup(rid).summary
    live = partial_points(store.series(rid))  # what the page draws while the sweep runs
    done = labelled_points(s["points"])  # ... and once it is done (stored before the embedding choice: A's)
    keys = ("label", "split", "loss_penalty")
    assert [tuple(p[k] for k in keys) for p in live] == [tuple(p[k] for k in keys) for p in done]
    assert all(p["label"].endswith("embed A") for p in done)


@pytest.mark.parametrize("run_id", ZOO)
def test_zoo_models_load(store, run_id):
    summary = store.lookup(run_id).summary
    m = load_model(summary["ref"], store=store)
    assert m.ref == summary["ref"] and m.input_kind == summary.get("input_kind", "image")
    if m.input_kind == "image":  # the digits CNNs score what they scored when they were trained
        ds = load_dataset(summary["dataset"])
        score = evaluate_batches(lambda x: m.model(m.preprocess(x)), ds.batches("test", 512), ds.num_classes,
                                 "cpu")  # fmt: skip
        assert score["accuracy"] == pytest.approx(summary["accuracy"], abs=1e-6)


# -- the app shows every run --------------------------------------------------------------------------------------


@pytest.fixture
def app_store(store_dir, monkeypatch, fresh_app_state):
    """The app over the copied store: its own store / runner, no worker threads left behind."""
    monkeypatch.setenv("STITCHLAB_STORE", str(store_dir))


def _charts(at: AppTest) -> str:
    return " ".join(c.proto.spec for c in at.get("plotly_chart"))


def _expect(at: AppTest, rec) -> None:
    """The kind-specific content the run's own page shows for a finished run."""
    s = rec.summary
    metrics = {m.label: m.value for m in at.metric}
    if rec.kind == "zoo":
        assert any(s["ref"] in m.value for m in at.markdown) and metrics["Test accuracy"] == f"{s['accuracy']:.1%}"
    elif rec.kind == "stitch":
        assert metrics["Stitched accuracy"] == f"{s['accuracy']:.1%}"
    elif rec.kind == "matrix":
        assert "Stitching accuracy" in _charts(at)
    elif rec.kind == "similarity":
        assert "Linear CKA" in _charts(at)
    elif rec.kind == "sweep":
        assert len(at.get("plotly_chart")) >= 2  # trait curves and the per-class heat map
    elif rec.kind in ("merge", "lmdepth"):
        assert metrics["Loss A"] == f"{s['base']['a']['loss']:.3f}"
        if rec.kind == "merge":
            assert metrics["Loss merged"] == f"{s['loss']:.3f}"
        else:
            assert "Loss penalty vs split depth" in _charts(at)


@pytest.mark.parametrize("run_id", RUNS)
def test_the_app_shows_every_run(app_store, store, run_id):
    import ui

    rec = store.lookup(run_id)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(f"views/{ui.PAGE_FOR_KIND[rec.kind]}.py")
    at.query_params["run"] = run_id
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    _expect(at, rec)
    at.switch_page("views/results.py").run()  # and on Results, the permalink target of any kind
    assert not at.exception, [e.message for e in at.exception]
    assert any(f"run `{run_id}` · {rec.kind} · done" in c.value for c in at.caption)
