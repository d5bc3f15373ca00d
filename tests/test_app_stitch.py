"""Home and Stitch pages through Streamlit's AppTest, over a real store and job runner.

AppTest cannot run ``run_every`` timers: a test submits, waits on the runner,
then runs the script again and reads what it drew.
"""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

import ui
from stitchcore.experiments.stitch import StitchSpec
from tests.conftest import ROOT


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_home_demo_button_runs_the_demo(app):
    at = app.run()
    assert not at.exception
    at.button[0].click().run()
    runner = ui.get_runner()
    jobs = runner.list()
    assert {j.kind for j in jobs} == {"zoo", "stitch"}
    stitch = next(j for j in jobs if j.kind == "stitch")
    final = runner.wait(stitch.id, timeout=120)
    assert final.state == "done", final.error


def test_stitch_form_launch_then_result_card_and_permalink(app):
    at = app.run().switch_page("views/stitch.py").run()
    assert not at.exception and not at.error
    assert at.selectbox(key="pick_a").value == "zoo:cnn-digits-s0"
    assert at.selectbox(key="pick_b").value == "zoo:cnn-digits-s1"
    assert "fc2" in at.selectbox(key="cut_a").options
    at.selectbox(key="cut_a").set_value("fc1").run()
    at.selectbox(key="cut_b").set_value("fc1").run()
    at.number_input(key="epochs").set_value(2).run()
    next(b for b in at.button if b.label == "Launch").click().run()
    run_id = at.query_params["run"][0] if isinstance(at.query_params["run"], list) else at.query_params["run"]
    assert ui.get_runner().wait(run_id, timeout=120).state == "done"
    at.run()
    assert float(_metric(at, "Stitched accuracy").rstrip("%")) > 80
    assert "Re-run" in [b.label for b in at.button]
    # the URL carries the form: a fresh page with only these parameters reproduces it
    params = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert params["cut_a"] == "fc1" and params["epochs"] == "2"
    fresh = AppTest.from_file(str(ROOT / "views" / "stitch.py"), default_timeout=90)
    fresh.query_params.update(params)
    fresh.run()
    assert not fresh.exception
    assert fresh.selectbox(key="cut_a").value == "fc1"
    assert fresh.number_input(key="epochs").value == 2
    assert _metric(fresh, "Stitched accuracy") == _metric(at, "Stitched accuracy")


def test_incompatible_receivers_are_explained_not_offered(app):
    at = app.run().switch_page("views/stitch.py").run()
    at.selectbox(key="cut_a").set_value("fc2").run()
    offered = at.selectbox(key="cut_b").options
    assert "block1" not in offered and "fc2" in offered
    assert any("not offered" in e.label for e in at.expander)


def test_bad_model_ref_shows_error_and_page_survives(app):
    at = app.run().switch_page("views/stitch.py").run()
    at.selectbox(key="pick_a").set_value("other (type a model ref)…").run()
    at.text_input(key="ref_a").input("tim:resnet18").run()
    assert not at.exception
    assert any("timm:" in e.value for e in at.error)


def test_url_with_stage_aliases_selects_the_canonical_cuts(tmp_path, monkeypatch, trained_store, fresh_app_state):
    """?cut_a=layer2 on zoo ResNets (layer2 = layer2.0 with one block per stage) picks layer2.0 and says so."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.store.results import Store
    from tests.conftest import copy_store

    copy = tmp_path / "store"
    copy_store(trained_store[0].root, copy)
    with Store(copy) as store:
        refs = [run_experiment("zoo", ZooRecipe(arch="resnet", dataset="digits", seed=s, epochs=1), store)
                .record.summary["ref"] for s in (0, 1)]
    monkeypatch.setenv("STITCHLAB_STORE", str(copy))
    at = AppTest.from_file(str(ROOT / "views" / "stitch.py"), default_timeout=120)
    at.query_params.update({"a": refs[0], "b": refs[1], "cut_a": "layer2", "cut_b": "layer3", "epochs": "0"})
    at.run()
    assert not at.exception and not at.error
    assert at.selectbox(key="cut_a").value == "layer2.0"
    assert at.selectbox(key="cut_b").value == "layer3.0"
    captions = " ".join(c.value for c in at.caption)
    assert "layer2 = layer2.0" in captions and "layer3 = layer3.0" in captions
    assert "layer2.0  (= layer2)" in at.selectbox(key="cut_a").options  # labels show the stage name
    next(b for b in at.button if b.label == "Launch").click().run()
    run_id = at.query_params["run"][0] if isinstance(at.query_params["run"], list) else at.query_params["run"]
    assert ui.get_runner().wait(run_id, timeout=120).state == "done"
    assert ui.get_store().lookup(run_id).spec["cut_a"] == "layer2.0"  # the spec holds the canonical name
    params = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert params["cut_a"] == "layer2.0" and params["cut_b"] == "layer3.0"
    at.selectbox(key="cut_a").set_value("layer1.0").run()  # another cut: the note goes
    assert "layer2 = layer2.0" not in " ".join(c.value for c in at.caption)


def test_out_of_range_url_values_are_shown_not_silently_replaced(app):
    """Issue 12, item 9: a link's values the form cannot hold are clamped or defaulted, and a warning
    names each (the value asked, the value used); Launch runs what the form shows."""
    app.query_params.update({"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "epochs": "100000", "lr": "nan",
                             "batch_size": "0", "max_train": "-5", "head": "zzz", "seed": "abc",
                             "objective": "task+0.5*kd"})
    at = app.run().switch_page("views/stitch.py").run()
    assert not at.exception
    warning = "\n".join(w.value for w in at.warning)
    for text in ("epochs=100000 is outside 0 to 500: using 500", "lr=nan is not a finite number",
                 "batch_size=0 is outside 4 to 4096: using 4", "max_train=-5 is outside",
                 "head='zzz' is not one the form offers (b, a): using 'b'", "seed='abc' is not a number"):
        assert text in warning.replace("\\", ""), (text, warning)
    assert at.number_input(key="epochs").value == 500 and at.number_input(key="batch_size").value == 4
    assert at.number_input(key="lr").value == StitchSpec(a="x", b="y", cut_a="c", cut_b="c").lr  # the default
    assert at.selectbox(key="head").value == "b" and at.selectbox(key="objective").value == "task+0.5*kd"
    assert any("value(s) of the link were changed" in c.value for c in at.caption)



def test_precision_comes_from_the_link_and_goes_into_the_spec(app):
    """bf16 is a form value like any other: a link sets it, Launch runs it, a bad one falls back to fp32."""
    app.query_params.update({"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "precision": "bf16"})
    at = app.run().switch_page("views/stitch.py").run()
    assert not at.exception and at.selectbox(key="precision").value == "bf16"
    assert any("· bf16" in c.value for c in at.caption)  # "Launch runs ... with a ... · bf16"
    at.query_params.update({"precision": "fp8"})
    fresh = app.run().switch_page("views/stitch.py")
    fresh.query_params.update({"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "precision": "fp8"})
    fresh = fresh.run()
    warning = "\n".join(w.value for w in fresh.warning)
    assert "precision='fp8' is not one the form offers (fp32, bf16): using 'fp32'" in warning.replace("\\", "")


def test_a_stitch_link_to_another_kind_of_run_says_so_and_links_its_page(app):
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.matrix import MatrixSpec

    matrix = run_experiment("matrix", MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", senders=("fc1",),
                                                 receivers=("fc2",)), ui.get_store()).record  # fmt: skip
    at = app.run().switch_page("views/stitch.py")
    at.query_params["run"] = matrix.id
    at.run()
    assert not at.exception and not at.error
    assert any(f"Run `{matrix.id}` is a matrix run, not a stitch" in i.value for i in at.info)


def test_a_link_naming_cuts_the_models_lack_says_so_beside_the_cut_shown(app):
    at = app.run().switch_page("views/stitch.py")
    at.query_params.update({"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "cut_a": "blok1", "cut_b": "fc9"})
    at.run()
    assert not at.exception
    said = [w.value for w in at.warning]
    shown_a = at.selectbox(key="cut_a").value
    assert any("cut 'blok1', which this model does not have (close: block1" in w and f"showing {shown_a}" in w
               for w in said), said  # fmt: skip
    assert any("cut 'fc9', which this model does not have" in w for w in said), said


def test_a_refused_adapter_offers_the_change_that_makes_it_valid(app):
    """Issue 40, item 6: a conv3x3_relu adapter cannot start from least squares; the page says so and offers the
    one change that fixes it (a button), which the spec names (StitchError.fix), not the page."""
    app.query_params.update({"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "kind": "conv3x3_relu",
                             "cut_a": "block2", "cut_b": "block2"})
    at = app.run().switch_page("views/stitch.py").run()
    assert not at.exception and at.selectbox(key="init").value == "lstsq"
    assert any("lstsq init needs a linear adapter" in e.value for e in at.error)
    fix = at.button(key="fix_adapter")
    assert fix.label == "Use Adapter start random"
    at = fix.click().run()
    assert not at.exception and at.selectbox(key="init").value == "random" and not at.error
    assert any("conv3x3_relu adapter" in c.value and "random init" in c.value for c in at.caption)


def test_a_link_says_the_whole_form_fields_it_leaves_out_go_back_to_their_defaults(app):
    """A link (and a run's link) leaves out the fields at today's default: opening one after another link set
    them must reset them, or the form would launch a run the link does not describe."""
    app.query_params.update({"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "epochs": "3", "keep": "best"})
    at = app.run().switch_page("views/stitch.py").run()
    assert at.number_input(key="epochs").value == 3 and at.selectbox(key="keep").value == "best"
    at.query_params.clear()
    at.query_params.update({"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "seed": "2"})
    at = at.run()
    default = StitchSpec(a="x", b="y", cut_a="c", cut_b="c")
    assert at.number_input(key="epochs").value == default.epochs and at.selectbox(key="keep").value == default.keep
    assert at.number_input(key="seed").value == 2
