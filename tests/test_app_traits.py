"""The Traits page through AppTest: run a preset as background jobs, see its plots, open a permalink."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

import ui
from stitchcore.experiments import run_experiment
from stitchcore.experiments.preset_seeds import seeded_preset
from stitchcore.experiments.sweep import SweepSpec
from stitchcore.experiments.trait_presets import get_preset, list_presets
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.store.results import Store, run_id_for
from tests.conftest import ROOT


@pytest.fixture(autouse=True)
def one_torch_thread(monkeypatch):
    """The app's runner sets torch to os.cpu_count() threads; on a shared 2-core machine that made these
    jobs 10x slower (45 s instead of 4 s, measured), so its jobs get one thread here as the tests do."""
    monkeypatch.setattr(os, "cpu_count", lambda: 1)


def _page(at: AppTest) -> AppTest:
    return at.run().switch_page("views/traits.py").run()


def _figure(at: AppTest, key: str) -> dict:
    """The plotly figure of chart ``key`` as the page sent it."""
    (chart,) = [c for c in at.get("plotly_chart") if c.key == key]
    return json.loads(chart.proto.spec)


def test_preset_button_runs_models_then_sweep_and_draws_the_plots(app):
    at = _page(app)
    assert not at.exception and not at.error
    at.button(key="preset_distributed").click().run()
    assert at.query_params["preset"] in ("distributed", ["distributed"])
    preset = get_preset("distributed")
    sweep_id = run_id_for("sweep", preset.sweeps[0].to_dict())
    assert ui.get_runner().wait(sweep_id, timeout=180).state == "done"  # its references run on: not waited for
    at.run()
    assert not at.exception and not at.error
    # trait curves, simplicity raw + normalised + the report's definitions, penalty curve, per-class heat map
    charts = at.get("plotly_chart")
    assert any(c.key == f"tr-simpr-{sweep_id}" for c in charts)
    # the preset's panel: class-3 accuracy of the claim sweep beside its two references, dashed
    panel = _figure(at, "tr-panel-distributed-0")
    assert [(t["name"].removesuffix(" (waiting)"), t["line"]["dash"]) for t in panel["data"]] == [
        (preset.sweep_titles[0], "solid"), ("random-init A -> B (plain)", "dash"),
        (preset.sweep_titles[2], "dash")]  # fmt: skip
    assert len(panel["data"][0]["y"]) == 5 and panel["layout"]["yaxis"]["title"]["text"].startswith("accuracy on")
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
    preset = get_preset("kernel-size")  # the cheapest Bansal preset: two models, six two-cut sweeps (3 kernels x 2 As)
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
    lines = _figure(at, "tr-panel-kernel-size-0")["data"]  # each kernel, then the random-init A through each, dashed
    assert [t["line"]["dash"] for t in lines] == ["solid"] * 3 + ["dash"] * 3 and len(lines[5]["y"]) == 2
    assert [t["name"] for t in lines[3:]] == [f"random-init A -> B, {k}x{k}" for k in (1, 3, 5)]


def test_every_preset_has_its_run_button():
    at = _page(AppTest.from_file(str(ROOT / "app.py"), default_timeout=120))
    assert not at.exception
    keys = {b.key for b in at.button}
    assert {f"preset_{p.name}" for p in list_presets()} <= keys  # rows of four: none cut off


def test_a_bansal_preset_opens_on_mnist5k_by_link_and_a_scale_it_lacks_says_so(app, monkeypatch):
    at = app
    at.query_params.update(preset="coarse-labels", data="mnist5k")
    _page(at)
    assert not at.exception and not at.error
    assert at.radio(key="tr_data").value == "mnist5k"
    assert any(c.value.startswith("Data: 28x28 MNIST") for c in at.caption)
    mnist = get_preset("coarse-labels", dataset="mnist5k")
    shown = " ".join(i.value for i in at.info)  # each sweep "has not been run yet (run <id>)": mnist5k's ids
    assert all(run_id_for("sweep", s.to_dict()) in shown for s in mnist.sweeps)
    assert run_id_for("sweep", get_preset("coarse-labels").sweeps[0].to_dict()) not in shown
    submitted = []  # Run queues mnist5k's models and sweeps (recorded here, not trained: minutes of 28x28 work)
    monkeypatch.setattr(ui.get_runner(), "submit",
                        lambda kind, spec: submitted.append(run_id_for(kind, spec.to_dict())) or SimpleNamespace(id=submitted[-1]))  # fmt: skip
    at.button(key="preset_coarse-labels").click().run()
    assert at.query_params["data"] in ("mnist5k", ["mnist5k"])  # the link keeps the data
    assert submitted == [*(run_id_for("zoo", r.to_dict()) for r in mnist.recipes),
                         *(run_id_for("sweep", s.to_dict()) for s in mnist.sweeps)]  # fmt: skip
    at.radio(key="tr_data").set_value("digits").run()  # the shown preset and its link follow the choice
    assert "data" not in at.query_params and not any(c.value.startswith("Data: 28x28") for c in at.caption)
    for query, words in (({"preset": "label-noise", "data": "mnist5k"}, "runs on digits only"),
                         ({"preset": "kernel-size", "data": "cifar"}, "asked for data=")):  # fmt: skip
        fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        fresh.query_params.update(query)
        _page(fresh)
        assert not fresh.exception and any(words in w.value for w in fresh.warning), query
        assert any(m.value == f"### {get_preset(query['preset']).title}" for m in fresh.markdown)


def test_a_preset_from_two_model_seeds_shows_each_cut_across_them(app, tmp_path):
    # Each sweep's result stored beforehand (a real two-cut sweep, small, written under every id with its
    # accuracy shifted): the button then queues every model and sweep of both seeds, trains the second seed's two
    # models and finds the twelve sweeps done, instead of running them (~60 s).
    with Store(tmp_path / "store") as served:  # the app fixture's copy of the session store
        small = replace(get_preset("kernel-size").sweeps[0], max_train=100, max_test=50, epochs=1)
        one = run_experiment("sweep", small, served).record.summary
        for k in range(2):
            for j, spec in enumerate(seeded_preset("kernel-size", k).sweeps):
                run_id = run_id_for("sweep", spec.to_dict())
                served.begin(run_id, "sweep", spec.to_dict())
                acc = [v - 0.01 * (j + k) for v in one["stitched"]["accuracy"]]
                served.finish(run_id, {**one, "a": spec.a, "b": spec.b, "stitched": {"accuracy": acc}})
    at = _page(app)
    at.number_input(key="tr_model_seeds").set_value(2).run()
    at.button(key="preset_kernel-size").click().run()
    assert at.query_params["seeds"] in ("2", ["2"])  # the link keeps the seeds
    queued = {job.id for job in ui.get_runner().list()}
    for k in range(2):  # the jobs of both seeds were queued: each seed's models and sweeps its own
        preset = seeded_preset("kernel-size", k)
        assert {run_id_for("sweep", s.to_dict()) for s in preset.sweeps} <= queued
        for recipe in preset.recipes:
            assert ui.get_runner().wait(run_id_for("zoo", recipe.to_dict()), timeout=240).state == "done"
    at.run()
    assert not at.exception and not at.error
    assert any("Across 2 model seeds" in m.value for m in at.markdown)
    assert any("2 of 2 finished for every sweep" in c.value for c in at.caption)
    lines = _figure(at, "tr-seeds-kernel-size-0")["data"]  # each line the mean over both seeds
    assert len(lines) == 6 and all(t["name"].endswith("(2 of 2 seeds)") for t in lines)
    b_accuracy, stitched = one["reference"]["b"]["metrics"]["accuracy"], one["stitched"]["accuracy"][0]
    assert lines[4]["y"][0] == pytest.approx(100 * (b_accuracy - stitched + 0.045), abs=1e-4)  # 3x3: j = 4


def test_a_sweep_link_refills_the_form_and_launching_it_is_the_same_run(app, tmp_path):
    """``?run=`` of a sweep fills "Your own sweep" from its spec (metrics, adapter data, control, simplicity, the
    adapter recipe it used, its cuts), so Launch as shown is that very run; a link naming fields fills them too."""
    spec = SweepSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", positions=("block2",), metrics=("accuracy",
                     "confusion:3->8"), adapter=AdapterSpec(init="lstsq"), epochs=0, control=False, simplicity=False,
                     noise_control=False, max_train=100, max_test=50)  # fmt: skip
    with Store(tmp_path / "store") as served:  # the app fixture's copy of the session store
        run_id = run_experiment("sweep", spec, served).record.id
    app.query_params["run"] = run_id
    at = _page(app)
    assert not at.exception and not at.error
    assert at.text_input(key="tr_metrics").value == "accuracy,confusion:3->8"  # as a link writes it
    assert not at.text_input(key="tr_train_data").value  # the page starts at digits|drop3; this run had none
    assert not at.checkbox(key="tr_control").value and not at.checkbox(key="tr_simplicity").value
    assert at.selectbox(key="tr_adapter").value == "least-squares match, fitted only (label-free)"
    assert at.multiselect(key="tr_positions").value == ["block2"]
    at.button(key="tr_launch").click().run()  # the form as filled makes the stored spec: no new run
    assert at.query_params["run"] in (run_id, [run_id])

    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    fresh.query_params.update(metrics="accuracy, shape:3", control="false", epochs="7")
    _page(fresh)
    assert not fresh.exception and not fresh.error
    said = " ".join(w.value for w in fresh.warning)
    assert "This link asked for values the form cannot use as given" in said and "metrics=" in said
    assert fresh.text_input(key="tr_metrics").value == "accuracy"  # the bad list held: today's default
    assert not fresh.checkbox(key="tr_control").value and fresh.checkbox(key="tr_simplicity").value
    assert any("none of these" in c.value for c in fresh.caption)  # 7 epochs: no adapter recipe is that
