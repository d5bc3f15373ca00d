"""The Language models page through AppTest: a tiny merge launched from the form, its results, the permalink."""

from __future__ import annotations

import time
from dataclasses import replace

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
    at.number_input(key="merge_sample_tokens").set_value(20).run()
    at.number_input(key="merge_start").set_value(1).run()
    assert not at.exception
    assert "A.wte → A.wpe → A.h.0 → B.h.1 → A.ln_f → A.lm_head" in [c.value for c in at.code]  # shown before running
    at.selectbox(key="merge_head").set_value("b").run()
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
    assert fresh.radio(key="lm_kind").value == "Merge" and fresh.selectbox(key="merge_head").value == "b"
    assert fresh.number_input(key="merge_start").value == 1 and fresh.number_input(key="merge_end").value is None
    assert _metric(fresh, "Loss merged") == _metric(at, "Loss merged")


def test_depth_sweep_from_the_page_draws_the_curves(lm_app):
    app, _ = lm_app
    at = app.run().switch_page("views/language.py").run()
    at.number_input(key="lmdepth_sample_tokens").set_value(0).run()
    at.number_input(key="lmdepth_eval_windows").set_value(8).run()
    at.number_input(key="lmdepth_steps").set_value(2).run()
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


def test_a_run_link_refills_the_stitch_form_and_launch_makes_that_run_again(lm_app):
    """``?run=`` of an lmstitch run (a lowrank adapter with an MLP branch, made off the page) fills the form
    from its spec, the experiment picker included, and Launch gives the very same run id."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.lm import LM_ADAPTER, LMStitchSpec

    app, (a, b) = lm_app
    spec = LMStitchSpec(a=a, b=b, cut_a=1, cut_b=2, adapter=replace(LM_ADAPTER, kind="lowrank", rank=4),
                        mlp_hidden=16, steps=3, until="steps", eval_windows=8, sample_tokens=0, seed=2)
    run_id = run_experiment("lmstitch", spec, ui.get_store()).record.id
    app.query_params["run"] = run_id
    at = app.run().switch_page("views/language.py").run()
    assert not at.exception and not at.error and not at.warning
    assert at.radio(key="lm_kind").value == "Stitch"
    assert at.selectbox(key="lm_pick_a").value == a and at.selectbox(key="lm_pick_b").value == b
    assert (at.number_input(key="lmstitch_cut_a").value, at.number_input(key="lmstitch_cut_b").value) == (1, 2)
    assert at.selectbox(key="lmstitch_kind").value == "lowrank" and at.number_input(key="lmstitch_rank").value == 4
    assert at.number_input(key="lmstitch_mlp_hidden").value == 16
    assert at.selectbox(key="lmstitch_until").value == "steps"
    assert at.number_input(key="lmstitch_seed").value == 2 and at.number_input(key="lmstitch_steps").value == 3
    at.button(key="lm_launch").click().run()
    assert not at.exception and not at.error
    again = at.query_params["run"]
    assert (again[0] if isinstance(again, list) else again) == run_id


def test_each_forms_defaults_are_todays_spec_defaults(lm_app, monkeypatch):
    """Launch on an untouched form runs the spec class's defaults (the declaration's), so its run id is the
    one the CLI and a lesson make for the same models."""
    from types import SimpleNamespace

    from stitchcore.experiments.lm import DepthSpec, LMStitchSpec, MergeSpec

    app, (a, b) = lm_app
    at = app.run().switch_page("views/language.py").run()
    made = []
    monkeypatch.setattr(type(ui.get_runner()), "submit",
                        lambda self, kind, spec, **_: made.append((kind, spec)) or SimpleNamespace(id="x"))
    for label in ("Penalty over depth", "Merge", "Stitch"):
        at.radio(key="lm_kind").set_value(label).run()
        at.button(key="lm_launch").click().run()
        assert not at.exception
    assert made == [("lmdepth", DepthSpec(a=a, b=b)), ("merge", MergeSpec(a=a, b=b)),
                    ("lmstitch", LMStitchSpec(a=a, b=b))]


def test_a_bad_link_value_is_held_with_a_note(lm_app):
    app, _ = lm_app
    for key, value in {"experiment": "lmstitch", "steps": "-5", "head": "zzz", "modes": "x", "lr": "abc"}.items():
        app.query_params[key] = value
    at = app.run().switch_page("views/language.py").run()
    assert not at.exception and not at.error
    assert at.radio(key="lm_kind").value == "Stitch"
    notes = "\n".join(w.value for w in at.warning)
    assert "steps=-5 is outside 0 to" in notes and "head='zzz' is not one the form offers" in notes
    assert "lr='abc' is not a number: using 0.001" in notes and "modes" not in notes  # no field of a stitch
    assert at.number_input(key="lmstitch_steps").value == 0 and at.selectbox(key="lmstitch_head").value == "b"
    assert any("value(s) of the link were changed" in c.value for c in at.caption)
    depth = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)  # a sweep's list keeps what it offers
    depth.query_params.update({"experiment": "lmdepth", "modes": "stitch,zzz", "splits": "0,1"})
    depth.run().switch_page("views/language.py").run()
    assert not depth.exception and depth.radio(key="lm_kind").value == "Penalty over depth"
    assert depth.multiselect(key="lmdepth_modes").value == ["stitch"] and "names 'zzz'" in depth.warning[0].value
    assert any(c.value == "Splits 0, 1, as the link says" for c in depth.caption)


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
    assert any("No GPTs trained yet" in i.value for i in at.info)
    assert "About" in _estimate_caption(at)  # the estimate above "Train GPT"
    assert at.selectbox(key="lm_pick_a").value == ui.CUSTOM_REF  # nothing to pick yet
    for key, value in (("lm_train_epochs", 1), ("lm_train_batch_size", 4), ("lm_train_seed", 5)):
        at.number_input(key=key).set_value(value).run()
    estimate = _estimate_caption(at)
    assert "About" in estimate and not estimate.startswith(":orange")  # 50 small steps: well under a minute
    at.button(key="lm_train").click().run()
    assert not at.exception and any("Training queued" in s.value for s in at.success)
    job = next(s for s in ui.get_runner().list() if s.kind == "zoo")
    done = ui.get_runner().wait(job.id, timeout=120)
    assert done.state == "done", done.error
    at.run()  # what ui.rerun_when_jobs_finish does in the browser once the job ends
    assert not at.exception and not any("No GPTs trained yet" in i.value for i in at.info)
    assert at.selectbox(key="lm_pick_a").value == done.summary["ref"]  # "other" was only the empty default
    assert at.number_input(key="lm_train_batch_size").value == 4  # the form kept its values
    # the page joins two models: the training section stays open (the same `expanded`: the browser keeps it as
    # it is), B waits for the second model, and once it exists the section folds and B takes it
    section = next(e for e in at.expander if e.label.startswith("Train a GPT here"))
    assert section.proto.expanded and any("One GPT trained" in i.value for i in at.info)
    assert at.selectbox(key="lm_pick_b").value == ui.CUSTOM_REF
    at.number_input(key="lm_train_seed").set_value(6).run()
    at.button(key="lm_train").click().run()
    second = next(s for s in ui.get_runner().list() if s.kind == "zoo" and s.id != job.id)
    assert ui.get_runner().wait(second.id, timeout=120).state == "done"
    at.run()
    section = next(e for e in at.expander if e.label.startswith("Train a GPT here"))
    assert not at.exception and not section.proto.expanded and not at.info
    assert at.selectbox(key="lm_pick_b").value == ui.get_runner().get(second.id).summary["ref"]
    assert at.selectbox(key="lm_pick_a").value == done.summary["ref"]
