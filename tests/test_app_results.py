"""The Results page (views/results.py) driven through Streamlit's AppTest, over a real store.

The store is filled once per module by real experiments (two zoo CNNs, one stitch, one
stitch that fails with a CutError) and copied for every test, so deleting stays local.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from stitchcore.errors import CutError
from stitchcore.experiments import run_experiment
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.store.results import Store, run_id_for
from stitchcore.timewords import date_words, duration_words

REPO = Path(__file__).resolve().parents[1]
STITCH = StitchSpec(a="zoo:cnn-digits-s0", b="zoo:cnn-digits-s1", cut_a="block1", cut_b="block1", epochs=1)
BROKEN = StitchSpec(a="zoo:cnn-digits-s0", b="zoo:cnn-digits-s1", cut_a="nope", cut_b="block1", epochs=1)


@pytest.fixture(scope="module")
def filled_store(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("results-store")
    with Store(root) as store:
        ids = {f"zoo{seed}": run_experiment("zoo", ZooRecipe(seed=seed), store).record.id for seed in (0, 1)}
        ids["stitch"] = run_experiment("stitch", STITCH, store).record.id
        with pytest.raises(CutError) as refused:  # refused before any row is written ...
            run_experiment("stitch", BROKEN, store)
        ids["failed"] = run_id_for("stitch", BROKEN.to_dict())
        assert store.lookup(ids["failed"]) is None
        store.begin(ids["failed"], "stitch", BROKEN.to_dict(), label=BROKEN.label())  # ... so a run that failed
        store.fail(ids["failed"], str(refused.value))  # that way before (an older version) is written by hand
    return root, ids


@pytest.fixture(autouse=True)
def fresh_app(fresh_app_state):
    """Each test gets its own store/runner (st.cache_resource) and leaves no worker threads behind."""


@pytest.fixture
def store_dir(filled_store, tmp_path, monkeypatch) -> tuple[Path, dict[str, str]]:
    root, ids = filled_store
    dst = tmp_path / "store"
    shutil.copytree(root, dst)
    monkeypatch.setenv("STITCHLAB_STORE", str(dst))
    return dst, ids


def results_page(run: str | None = None) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
    at.switch_page("views/results.py")
    if run is not None:
        at.query_params["run"] = run
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def table(at: AppTest):
    return at.dataframe[0].value  # the runs table is the page's first dataframe


def pick(at: AppTest, *ids: str) -> AppTest:
    ms = at.multiselect(key="results-pick")
    for rid in ids:
        ms.select(rid)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_table_lists_every_run_with_status_and_metric(store_dir):
    _, ids = store_dir
    at = results_page()
    df = table(at).set_index("id")
    assert set(df.index) == set(ids.values())
    assert df.loc[ids["failed"], "status"] == "failed"
    assert "nope" in df.loc[ids["failed"], "error"]
    assert (df.drop(ids["failed"])["status"] == "done").all()
    assert df.loc[ids["zoo0"], "label"] == "zoo:cnn-digits-s0"  # a readable label, not just "zoo"
    assert "block1" in df.loc[ids["stitch"], "label"]
    assert 50 < df.loc[ids["zoo1"], "accuracy_pct"] <= 100
    assert df.loc[ids["stitch"], "penalty_pts"] == pytest.approx(
        Store(store_dir[0]).lookup(ids["stitch"]).summary["penalty"] * 100
    )
    assert df.loc[ids["stitch"], "duration_s"] >= 0  # seconds (the CSV), in words on the page:
    assert df.loc[ids["stitch"], "duration"] == duration_words(df.loc[ids["stitch"], "duration_s"])
    assert [b.label for b in at.get("download_button")] == ["Table as CSV"]


def test_filters_narrow_the_table(store_dir):
    _, ids = store_dir
    at = results_page()
    at.multiselect(key="results-kind").select("zoo").run()
    assert set(table(at)["kind"]) == {"zoo"} and len(table(at)) == 2
    at.multiselect(key="results-kind").unselect("zoo").select("stitch")
    at.multiselect(key="results-status").select("failed").run()
    assert list(table(at)["id"]) == [ids["failed"]]
    at.multiselect(key="results-status").unselect("failed")
    at.text_input(key="results-search").input("S1[BLOCK1]").run()
    assert sorted(table(at)["id"]) == sorted([ids["stitch"], ids["failed"]])
    at.text_input(key="results-search").input("no such run").run()
    assert table(at).empty
    assert any("No run matches" in c.value for c in at.caption)


def test_permalink_opens_the_run_card(store_dir):
    root, ids = store_dir
    summary = Store(root).lookup(ids["stitch"]).summary
    at = results_page(run=ids["stitch"])
    header = next(c.value for c in at.caption if c.value.startswith(f"run `{ids['stitch']}`"))
    stored = Store(root).lookup(ids["stitch"])
    assert header.endswith(f"· stitch · done · stored result (run {date_words(stored.finished)})"), header
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Stitched accuracy"] == f"{summary['accuracy']:.1%}"
    assert metrics["Model B"] == f"{summary['base']['b']:.1%}"
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Table as CSV", "CSV: Stitched vs base accuracy", "CSV: Per-class accuracy", "Metrics CSV",
                      "Run JSON"]
    assert {"Download bundle", "Download report"} <= {b.label for b in at.button}  # made on click

    at = results_page(run=ids["failed"])
    assert any("This run failed" in e.value and "nope" in e.value for e in at.error)


def test_picking_one_run_opens_it_and_sets_the_url(store_dir):
    _, ids = store_dir
    at = pick(results_page(), ids["zoo1"])
    assert at.query_params["run"] == ids["zoo1"]
    accuracy = Store(store_dir[0]).lookup(ids["zoo1"]).summary["accuracy"]
    assert f"{accuracy:.1%}" in [m.value for m in at.metric]  # the zoo card of that run


def test_picking_two_runs_compares_them(store_dir):
    _, ids = store_dir
    at = pick(results_page(), ids["zoo0"], ids["stitch"])
    assert [s.value for s in at.subheader] == ["Compare 2 runs"]
    assert not at.metric  # no single run card
    assert len(at.get("plotly_chart")) == 1
    side = at.dataframe[1].value
    assert list(side["Status"]) == ["done", "done"] and "Accuracy" in side.columns
    at.radio(key="results-metric").set_value("test_accuracy").run()
    assert not at.exception


def test_two_picked_runs_download_as_one_bundle(store_dir, tmp_path):
    from stitchcore.store.bundle import read_manifest
    from ui import bundle_bytes

    root, ids = store_dir
    at = pick(results_page(), ids["zoo0"], ids["stitch"])
    labels = [b.label for b in at.button]
    assert "Download bundle (2 runs)" in labels and "Download report (2 runs)" in labels
    with Store(root) as src:
        data = bundle_bytes(src, ids["zoo0"], ids["stitch"])  # what the button serves
        want = {ids["zoo0"], ids["stitch"]}
    path = tmp_path / "two.zip"
    path.write_bytes(data)
    runs = {r["id"] for r in read_manifest(path)["runs"]}
    assert want <= runs  # both picked runs, plus the zoo models the stitch uses


def test_delete_needs_confirmation(store_dir):
    root, ids = store_dir
    at = pick(results_page(), ids["failed"])
    assert at.button(key="results-delete").disabled  # nothing happens before the checkbox
    at.checkbox(key=f"results-confirm-delete-{ids['failed']}").check().run()
    assert not at.button(key="results-delete").disabled
    pick(at, ids["zoo0"])  # a changed selection must be confirmed anew
    assert (
        at.button(key="results-delete").disabled and at.button(key="results-delete").label == "Delete 2 runs"
    )
    at.multiselect(key="results-pick").unselect(ids["zoo0"]).run()
    assert at.button(key="results-delete").disabled  # back to one run: still asks again
    at.checkbox(key=f"results-confirm-delete-{ids['failed']}").check().run()
    at.button(key="results-delete").click().run()
    assert not at.exception
    assert ids["failed"] not in set(table(at)["id"]) and len(table(at)) == 3
    assert Store(root).lookup(ids["failed"]) is None
    assert any("Deleted 1 run" in s.value for s in at.success)
    assert "run" not in at.query_params  # the deleted run is no longer linked


def test_running_runs_cannot_be_deleted(store_dir):
    root, _ = store_dir
    at = results_page()  # the runner starts (and marks stale runs interrupted) before the busy run
    Store(root).begin("busy0123456789ab", "stitch", {"a": 1}, label="busy stitch")
    at.run()
    at = pick(at, "busy0123456789ab")
    assert any("can't be deleted" in w.value for w in at.warning)
    assert not at.get("checkbox") and not any(b.key == "results-delete" for b in at.button)


def test_viewer_mode_cannot_delete(store_dir, monkeypatch):
    _, ids = store_dir
    monkeypatch.setenv("STITCHLAB_VIEWER", "1")
    at = pick(results_page(), ids["zoo0"])
    assert any("Viewer mode" in c.value for c in at.caption)
    assert not any(b.key == "results-delete" for b in at.button)


def test_empty_store_links_to_the_demo(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHLAB_STORE", str(tmp_path / "empty"))
    at = results_page()
    assert any("No runs in the store yet" in i.value for i in at.info)
    links = at.get("page_link")
    assert len(links) == 1 and "Home" in links[0].proto.label and links[0].proto.page_script_hash
    assert not at.dataframe


# -- every kind opens in its own view on Results (issue 11) -------------------------------------------------------

FIXTURE = REPO / "tests" / "fixtures" / "store_v1"  # one run of every kind but lmstitch; copied, never written
V1_RUNS = {"3a5c8fd66da321ff": "zoo", "6d9f490702433fc1": "stitch", "948efef379ab0882": "matrix",
           "85d6995881b3ee60": "similarity", "2daff2acaae2878b": "sweep", "7b32b03feebed0fd": "merge",
           "70492b7db4bce988": "lmdepth"}  # fmt: skip
PAGE_TITLE = {"zoo": "Models", "stitch": "Stitch", "matrix": "Similarity", "similarity": "Similarity",
              "sweep": "Traits", "merge": "Language models", "lmdepth": "Language models"}  # fmt: skip


@pytest.fixture
def v1_store(tmp_path, monkeypatch) -> Path:
    from tests.conftest import copy_store

    dst = tmp_path / "v1"
    copy_store(FIXTURE, dst)
    monkeypatch.setenv("STITCHLAB_STORE", str(dst))
    return dst


def _charts(at: AppTest) -> str:
    return " ".join(c.proto.spec for c in at.get("plotly_chart"))


def _expect_kind_view(at: AppTest, rec) -> None:
    """The content the kind's own page draws for a finished run (not the generic training-curve card)."""
    s, charts = rec.summary, _charts(at)
    metrics = {m.label: m.value for m in at.metric}
    assert "waiting for the first steps" not in charts.lower()
    if rec.kind == "zoo":
        assert metrics["Test accuracy"] == f"{s['accuracy']:.1%}"
    elif rec.kind == "stitch":
        assert metrics["Stitched accuracy"] == f"{s['accuracy']:.1%}"
    elif rec.kind == "matrix":
        assert "Stitching accuracy" in charts and "Linear CKA" in charts  # with the similarity launched beside it
        at.radio(key="results_metric").set_value("penalty").run()  # the panel's own control works here too
        assert not at.exception and "Stitching penalty" in _charts(at)
        assert at.selectbox(key="results_cell_sender").options == [str(x) for x in s["senders"]]
    elif rec.kind == "similarity":
        assert "Linear CKA" in charts
    elif rec.kind == "sweep":
        assert "Per-class accuracy of the stitched model" in charts and len(at.get("plotly_chart")) >= 2
    elif rec.kind == "merge":
        assert metrics["Loss merged"] == f"{s['loss']:.3f}" and "Loss A" in metrics
    elif rec.kind == "lmdepth":
        assert "Loss penalty vs split depth" in charts and metrics["Points"] == str(len(s["points"]))


@pytest.mark.parametrize("run_id", V1_RUNS)
def test_every_kind_opens_in_its_own_view_with_a_link_to_its_page(v1_store, run_id):
    import ui

    rec = Store(v1_store).lookup(run_id)
    at = results_page(run=run_id)
    assert not at.error, [e.value for e in at.error]
    assert any(f"run `{run_id}` · {rec.kind} · done" in c.value for c in at.caption)
    _expect_kind_view(at, rec)
    links = {link.proto.label: link.proto for link in at.get("page_link")}
    link = links[f"Open on the {PAGE_TITLE[rec.kind]} page"]
    beside = "&cka=85d6995881b3ee60" if rec.kind == "matrix" else ""  # the similarity run launched with it
    assert link.page.strip("/") == ui.PAGE_FOR_KIND[rec.kind] and link.query_string == f"run={run_id}{beside}"
    assert [b.label for b in at.get("download_button")][-2:] == ["Metrics CSV", "Run JSON"]
    assert [b.label for b in at.button][-3:] == ["Download bundle", "Download report", "Add as the last step"]


def test_picking_a_sweep_row_opens_its_own_view(v1_store):
    at = pick(results_page(), "2daff2acaae2878b")
    assert at.query_params["run"] == "2daff2acaae2878b"
    assert "Per-class accuracy of the stitched model" in _charts(at)


def test_failed_runs_show_no_none_and_the_full_id(store_dir):
    _, ids = store_dir
    at = results_page()
    df = table(at).set_index("id")
    assert df["accuracy_pct"].dtype == float and df["accuracy_pct"].isna()[ids["failed"]]  # NaN, not None
    grid = at.dataframe[0].proto
    assert grid.placeholder == "—"  # the empty cells read "—"
    import json

    columns = json.loads(grid.columns)
    assert columns["id"]["width"] >= 140  # 16 characters fit


# -- bundles (issue 13): Download bundle in a run's view, Import bundle on Results -------------------------------


def _import(at: AppTest, name: str, data: bytes) -> AppTest:
    at.file_uploader(key="results-bundle").upload(name, data)
    at.run()
    at.button(key="results-import").click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_downloaded_bundle_imports_into_an_empty_store(v1_store, tmp_path, monkeypatch):
    from ui import bundle_bytes

    at = results_page(run="6d9f490702433fc1")
    make = next(b for b in at.button if b.label == "Download bundle")
    make.click().run()  # makes the zip; a download button then serves it, and stays on the next run
    for _ in range(2):
        saves = [b.label for b in at.get("download_button") if b.label.startswith("Save bundle · ")]
        assert len(saves) == 1 and saves[0].endswith(" kB"), [b.label for b in at.get("download_button")]
        assert "Download bundle" not in [b.label for b in at.button]
        at.run()
    with Store(v1_store) as src:
        data = bundle_bytes(src, "6d9f490702433fc1")  # what the button serves: the stitch and its two zoo models
        want = [src.lookup(rid) for rid in ("6d9f490702433fc1", "3a5c8fd66da321ff", "d927a0202342c09e")]

    monkeypatch.setenv("STITCHLAB_STORE", str(tmp_path / "empty"))
    import streamlit as st

    import ui

    ui.get_runner().shutdown()
    ui.get_store().close()
    st.cache_resource.clear()  # the app's store now opens the empty one
    at = results_page()
    assert any("No runs in the store yet" in i.value for i in at.info)
    at = _import(at, "stitch.zip", data)
    assert any("Imported 3 runs from stitch.zip" in s.value for s in at.success), [e.value for e in at.error]
    assert set(table(at)["id"]) == {r.id for r in want}
    with Store(tmp_path / "empty") as dst:
        got = [dst.lookup(r.id) for r in want]
        assert [replace(r, imported=None, imported_from=None) for r in got] == want and dst.integrity_check() == []
        assert all(r.imported_from == "stitch.zip" for r in got)
    at = results_page(run="6d9f490702433fc1")  # its header says it was imported, from which bundle, run when
    header = next(c.value for c in at.caption if c.value.startswith("run `6d9f490702433fc1`"))
    ran = date_words(want[0].finished)
    assert f"· imported from the bundle stitch.zip on {date_words(got[0].imported)} (run {ran})" in header, header
    assert "cache" not in header
    at = _import(at, "stitch.zip", data)  # again: every run already here
    assert any("Imported 0 runs" in s.value and "3 runs already here, skipped" in s.value for s in at.success)


def test_bad_bundle_upload_is_one_error_and_nothing_imported(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHLAB_STORE", str(tmp_path / "empty"))
    at = _import(results_page(), "notes.zip", b"not a zip at all")
    assert [e.value for e in at.error] == [("notes.zip is not a usable bundle: not a zip file, or truncated"
                                            " (File is not a zip file); nothing was imported")]
    assert any("No runs in the store yet" in i.value for i in at.info)


def test_viewer_mode_cannot_import(store_dir, monkeypatch):
    monkeypatch.setenv("STITCHLAB_VIEWER", "1")
    at = results_page()
    assert at.file_uploader(key="results-bundle").disabled and at.button(key="results-import").disabled
    assert any("bundles can't be imported" in c.value for c in at.caption)
