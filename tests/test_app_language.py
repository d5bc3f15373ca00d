"""The Language models page through AppTest: a tiny merge launched from the form, its results, the permalink."""

from __future__ import annotations

import time

import pytest
from streamlit.testing.v1 import AppTest

import ui
from stitchcore.store.results import Store
from tests.conftest import ROOT
from tests.lm_helpers import train_tiny


@pytest.fixture
def lm_app(tmp_path, monkeypatch):
    """AppTest of app.py over a fresh store holding two tiny char-GPTs; runner shut down after."""
    import streamlit as st

    store = Store(tmp_path / "store")
    refs = [train_tiny(store, 0), train_tiny(store, 1)]
    store.close()
    monkeypatch.setenv("STITCHLAB_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("STITCHLAB_VIEWER", raising=False)
    st.cache_resource.clear()
    yield AppTest.from_file(str(ROOT / "app.py"), default_timeout=120), refs
    ui.get_runner().shutdown()
    ui.get_store().close()
    st.cache_resource.clear()


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_merge_from_the_page_then_results_and_permalink(lm_app):
    app, (a, b) = lm_app
    at = app.run().switch_page("views/language.py").run()
    assert not at.exception and not at.error
    assert at.selectbox(key="lm_pick_a").value == a and at.selectbox(key="lm_pick_b").value == b
    at.radio(key="lm_kind").set_value("Merge").run()
    at.number_input(key="lm_samples").set_value(20).run()
    assert not at.exception
    assert "A.wte → A.wpe → A.h.0 → B.h.1 → A.ln_f → A.lm_head" in [c.value for c in at.code]  # shown before running
    at.radio(key="lm_head").set_value("b").run()
    at.button(key="lm_launch").click().run()
    run_id = at.query_params["run"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    assert ui.get_runner().wait(run_id, timeout=120).state == "done"
    at.run()
    assert not at.exception and not at.error
    assert float(_metric(at, "Loss merged")) > 0
    # worse than B (a higher loss): stored negative as the GPT-2 report has it, shown positive (higher = worse)
    from stitchcore.plots.penalty import format_pct, loss_penalty_pct

    summary = ui.get_store().lookup(run_id).summary
    assert summary["loss"] > summary["base"]["b"]["loss"] and summary["loss_penalty"] < 0
    assert _metric(at, "Loss penalty (base B)") == format_pct(loss_penalty_pct(summary["loss_penalty"]))
    assert _metric(at, "Loss penalty (base B)").startswith("+") and _metric(at, "Loss penalty (base B)").endswith(" %")
    assert len(at.get("plotly_chart")) >= 1
    assert len(at.code) >= 4  # the layout and three samples (A, B, merged)
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    fresh.query_params["run"] = run_id
    fresh.run().switch_page("views/language.py").run()
    assert not fresh.exception
    assert fresh.radio(key="lm_kind").value == "Merge" and fresh.radio(key="lm_head").value == "b"
    assert _metric(fresh, "Loss merged") == _metric(at, "Loss merged")


def test_depth_sweep_from_the_page_draws_the_curves(lm_app):
    app, _ = lm_app
    at = app.run().switch_page("views/language.py").run()
    at.number_input(key="lm_samples").set_value(0).run()
    at.number_input(key="lm_windows").set_value(8).run()
    at.number_input(key="lm_steps").set_value(2).run()
    at.button(key="lm_launch").click().run()
    run_id = at.query_params["run"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    assert ui.get_runner().wait(run_id, timeout=120).state == "done"
    at.run()
    assert not at.exception and not at.error
    assert _metric(at, "Points") == "12"  # (merge, stitch) x (head a, head b) x splits 0..2
    depth_chart = next(c.proto.spec for c in at.get("plotly_chart") if "Loss penalty vs split depth" in c.proto.spec)
    for label in ("merge, head A, embed A", "merge, head B, embed B", "stitch, head B, embed A"):
        assert label in depth_chart  # curves say whose head and whose embeddings (default: tied to the head)
    assert any("Merges read the embeddings tied to the head" in c.value for c in at.caption)


@pytest.fixture
def empty_app(tmp_path, monkeypatch, fresh_app_state):
    """AppTest of app.py over an empty store (no char-GPTs yet)."""
    monkeypatch.setenv("STITCHLAB_STORE", str(tmp_path / "empty"))
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)


def _estimate_caption(at: AppTest) -> str:
    """The estimate's caption once its background calibration is done (what the page's poll does)."""
    deadline = time.monotonic() + 120
    while not any("About" in c.value for c in at.caption):
        assert any("Estimating" in c.value for c in at.caption) and time.monotonic() < deadline
        time.sleep(0.5)
        at.run()
    return next(c.value for c in at.caption if "About" in c.value)


def test_train_form_says_how_long_then_the_pickers_list_the_new_model(empty_app):
    at = empty_app.run().switch_page("views/language.py").run()
    assert not at.exception and not at.error
    assert any("No char-GPTs trained yet" in i.value for i in at.info)
    assert "About" in _estimate_caption(at)  # the estimate above "Train char-GPT"
    assert at.selectbox(key="lm_pick_a").value == ui.CUSTOM_REF  # nothing to pick yet
    for key, value in (("lm_train_epochs", 1), ("lm_train_batch", 4), ("lm_train_seed", 5)):
        at.number_input(key=key).set_value(value).run()
    estimate = _estimate_caption(at)
    assert "About" in estimate and not estimate.startswith(":orange")  # 50 small steps: well under a minute
    at.button(key="lm_train").click().run()
    assert not at.exception and any("Training queued" in s.value for s in at.success)
    job = next(s for s in ui.get_runner().list() if s.kind == "zoo")
    done = ui.get_runner().wait(job.id, timeout=120)
    assert done.state == "done", done.error
    at.run()  # what ui.rerun_when_jobs_finish does in the browser once the job ends
    assert not at.exception and not any("No char-GPTs trained yet" in i.value for i in at.info)
    assert at.selectbox(key="lm_pick_a").value == done.summary["ref"]  # "other" was only the empty default
    assert at.number_input(key="lm_train_batch").value == 4  # the form kept its values
    # the page joins two models: the training section stays open (the same `expanded`: the browser keeps it as
    # it is), B waits for the second model, and once it exists the section folds and B takes it
    section = next(e for e in at.expander if e.label == "Train a character-level GPT here")
    assert section.proto.expanded and any("One char-GPT trained" in i.value for i in at.info)
    assert at.selectbox(key="lm_pick_b").value == ui.CUSTOM_REF
    at.number_input(key="lm_train_seed").set_value(6).run()
    at.button(key="lm_train").click().run()
    second = next(s for s in ui.get_runner().list() if s.kind == "zoo" and s.id != job.id)
    assert ui.get_runner().wait(second.id, timeout=120).state == "done"
    at.run()
    section = next(e for e in at.expander if e.label == "Train a character-level GPT here")
    assert not at.exception and not section.proto.expanded and not at.info
    assert at.selectbox(key="lm_pick_b").value == ui.get_runner().get(second.id).summary["ref"]
    assert at.selectbox(key="lm_pick_a").value == done.summary["ref"]
