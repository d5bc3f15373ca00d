"""The Traits page through AppTest: run a preset as background jobs, see its plots, open a permalink."""

from __future__ import annotations

import os

import pytest
from streamlit.testing.v1 import AppTest

import ui
from stitchcore.experiments.preset_seeds import seeded_preset
from stitchcore.experiments.trait_presets import get_preset, list_presets
from stitchcore.store.results import run_id_for
from tests.conftest import ROOT


@pytest.fixture(autouse=True)
def one_torch_thread(monkeypatch):
    """The app's runner sets torch to os.cpu_count() threads; on a shared 2-core machine that made these
    jobs 10x slower (45 s instead of 4 s, measured), so its jobs get one thread here as the tests do."""
    monkeypatch.setattr(os, "cpu_count", lambda: 1)


def _page(at: AppTest) -> AppTest:
    return at.run().switch_page("views/traits.py").run()


def test_preset_button_runs_models_then_sweep_and_draws_the_plots(app):
    at = _page(app)
    assert not at.exception and not at.error
    at.button(key="preset_distributed").click().run()
    assert at.query_params["preset"] in ("distributed", ["distributed"])
    sweep_id = run_id_for("sweep", get_preset("distributed").sweeps[0].to_dict())
    assert ui.get_runner().wait(sweep_id, timeout=180).state == "done"
    at.run()
    assert not at.exception and not at.error
    # trait curves, simplicity raw + normalised + the report's definitions, penalty curve, per-class heat map
    charts = at.get("plotly_chart")
    assert len(charts) == 6 and any(c.key == f"tr-simpr-{sweep_id}" for c in charts)
    # the permalink of the sweep in a fresh session shows the same plots and fills the form
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    fresh.query_params["run"] = sweep_id
    _page(fresh)
    assert not fresh.exception and len(fresh.get("plotly_chart")) == 6
    assert "class_acc:3" in fresh.text_input(key="tr_metrics").value


def test_build_a_and_b_from_recipes_and_viewer_mode(app, monkeypatch):
    at = _page(app)
    at.selectbox(key="tr_trait_a").select("drop").run()
    at.text_input(key="tr_metrics").input("accuracy, class_acc:3").run()
    at.button(key="tr_build").click().run()
    run_id = at.query_params["run"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    assert ui.get_runner().wait(run_id, timeout=180).state == "done"
    at.run()
    assert not at.exception and len(at.get("plotly_chart")) == 6  # the report's simplicity panels too
    monkeypatch.setenv("STITCHLAB_VIEWER", "1")
    viewer = _page(AppTest.from_file(str(ROOT / "app.py"), default_timeout=120))
    assert viewer.button(key="preset_inheritance").disabled and viewer.button(key="tr_build").disabled


def test_a_bansal_preset_draws_its_penalty_panel_waiting_then_filled(app):
    preset = get_preset("kernel-size")  # the cheapest Bansal preset: two models, three two-cut sweeps
    at = app
    at.query_params["preset"] = "kernel-size"
    _page(at)
    assert not at.exception and not at.error
    assert any("Not run yet" in c.value for c in at.caption)  # the link works before the preset has run
    at.button(key="preset_kernel-size").click().run()
    for spec in preset.sweeps:
        assert ui.get_runner().wait(run_id_for("sweep", spec.to_dict()), timeout=240).state == "done"
    at.run()
    assert not at.exception and not at.error
    assert not any("Not run yet" in c.value for c in at.caption)
    assert [e.label for e in at.expander if e.label.startswith("Sweep:")] == [f"Sweep: {t}" for t in preset.sweep_titles]
    # the penalty panel, then each sweep's trait curves, penalty curve and per-class heat map
    assert len(at.get("plotly_chart")) == 1 + 3 * len(preset.sweeps)


def test_every_preset_has_its_run_button():
    at = _page(AppTest.from_file(str(ROOT / "app.py"), default_timeout=120))
    assert not at.exception
    keys = {b.key for b in at.button}
    assert {f"preset_{p.name}" for p in list_presets()} <= keys  # rows of four: none cut off


def test_a_preset_from_two_model_seeds_shows_each_cut_across_them(app):
    at = _page(app)
    at.number_input(key="tr_model_seeds").set_value(2).run()
    at.button(key="preset_kernel-size").click().run()
    assert at.query_params["seeds"] in ("2", ["2"])  # the link keeps the seeds
    for k in range(2):  # the jobs of both seeds were queued: each seed's models and sweeps its own
        for spec in seeded_preset("kernel-size", k).sweeps:
            assert ui.get_runner().wait(run_id_for("sweep", spec.to_dict()), timeout=240).state == "done"
    at.run()
    assert not at.exception and not at.error
    assert any("Across 2 model seeds" in m.value for m in at.markdown)
    assert any("2 of 2 finished for every sweep" in c.value for c in at.caption)
    assert any(c.key == "tr-seeds-kernel-size-0" for c in at.get("plotly_chart"))
