"""The Similarity page through AppTest: launch a matrix with controls and CKA, see the heat maps."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

import ui
from tests.conftest import ROOT


def _similarity_titles(at: AppTest) -> list[str]:
    """The titles of the similarity run's heat maps on the page (the matrix's own panels left out)."""
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    return [t for t in titles if t.startswith("Linear CKA")]


def test_launch_matrix_with_controls_and_cka_then_permalink(app):
    at = app.run().switch_page("views/similarity.py").run()
    assert not at.exception and not at.error
    at.checkbox(key="sim_controls").check().run()
    at.number_input(key="sim_max_train").set_value(400).run()  # the controls are task-trained: keep them small
    assert any("Can differ from chance" in c.value for c in at.caption)  # said by the form, before Launch
    at.button(key="sim_launch").click().run()
    run_id, cka_id = at.query_params["run"], at.query_params["cka"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    cka_id = cka_id[0] if isinstance(cka_id, list) else cka_id
    runner = ui.get_runner()
    assert runner.wait(run_id, timeout=180).state == "done"
    assert runner.wait(cka_id, timeout=180).state == "done"
    at.run()
    assert not at.exception and not at.error
    charts = at.get("plotly_chart")
    shown = _similarity_titles(at)
    assert len(shown) == 1 and shown[0].startswith("Linear CKA, beyond random-init B"), shown  # calibrated first
    calibrated = json.loads(charts[1].proto.spec)  # beside the stitching panel
    assert calibrated["layout"]["title"]["text"] == shown[0]
    bar = calibrated["data"][0]["colorbar"]["title"]["text"]
    assert bar.startswith("sds vs random-init B") and "untrained B" in bar  # the colour bar says what it is
    assert any("random-init Bs (B's architecture, no training)" in c.value for c in at.caption)
    at.radio(key="sim_simview").set_value("raw").run()  # the raw values, beside their baselines
    assert not at.exception and not at.error
    raw = _similarity_titles(at)
    assert len(at.get("plotly_chart")) == len(charts) + 3  # (two columns: drawn column by column)
    assert sorted(raw) == ["Linear CKA", "Linear CKA, A against an untrained B (random-init null, mean of 5 seeds)",
                           "Linear CKA, dependence test (shuffled images)", "Linear CKA, shuffled inputs (baseline)"]
    at.radio(key="sim_simview").set_value("calibrated").run()
    assert any("skipped" in e.label for e in at.expander)
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert sorted(t for t in titles if t.startswith("Control: ")) == [
        f"Control: {name} (accuracy)" for name in ("both random", "noise sender", "random receiver", "random sender")]
    # closed-form cells are debiased only against the controls fitted alike; the two into a random receiver are
    # task-trained (a fit there copies random B: chance), drawn beside the matrix and never subtracted
    assert sorted(t for t in titles if t.startswith("Debiased: ")) == [
        "Debiased: trained − noise sender", "Debiased: trained − random sender"]
    assert len(titles) == len(charts) == 1 + 1 + 4 + 2  # stitching, calibrated CKA, the controls, two debiased
    beside = {c.value.partition(".**")[0].removeprefix("**Control: "): c.value for c in at.caption
              if c.value.startswith("**Control: ")}  # one line by each control's panels
    assert sorted(beside) == ["both random", "noise sender", "random receiver", "random sender"] and not at.warning
    assert all("Can differ from chance" in line for line in beside.values())
    assert {name for name, line in beside.items() if "No debiased map" in line} == {"random receiver", "both random"}
    # the permalink in a fresh session shows the same panels and fills the form
    # (AppTest does not follow st.switch_page from the router; the real browser test does)
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    fresh.query_params.update({"run": run_id, "cka": cka_id})
    fresh.run().switch_page("views/similarity.py").run()
    assert not fresh.exception
    assert fresh.checkbox(key="sim_controls").value is True
    assert len(fresh.get("plotly_chart")) == len(charts) and len(_similarity_titles(fresh)) == 1  # calibrated


def test_chosen_cuts_and_measure_reach_the_specs(app):
    at = app.run().switch_page("views/similarity.py").run()
    at.radio(key="sim_cutset").set_value("choose").run()
    assert at.multiselect(key="sim_cuts_a").value == ["block1", "block2", "flatten", "fc1", "fc2"]
    at.multiselect(key="sim_cuts_a").set_value(["fc1", "block2"]).run()
    at.multiselect(key="sim_cuts_b").set_value(["fc2"]).run()
    at.selectbox(key="sim_measure").set_value("procrustes").run()
    at.button(key="sim_launch").click().run()
    assert not at.exception and not at.error
    run_id, cka_id = (at.query_params[k] for k in ("run", "cka"))
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    cka_id = cka_id[0] if isinstance(cka_id, list) else cka_id
    store = ui.get_store()
    assert store.lookup(run_id).spec["senders"] == ["block2", "fc1"]  # execution order, not click order
    assert store.lookup(run_id).spec["receivers"] == ["fc2"]
    assert store.lookup(cka_id).spec["measure"] == "procrustes"
    assert store.lookup(cka_id).spec["senders"] == ["block2", "fc1"]
    runner = ui.get_runner()
    assert runner.wait(run_id, timeout=180).state == "done" and runner.wait(cka_id, timeout=180).state == "done"
    at.run()
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("Procrustes distance" in t for t in titles)
    at.radio(key="sim_metric").set_value("penalty").run()
    assert not at.exception
    assert any("Stitching penalty" in c.proto.spec for c in at.get("plotly_chart"))
    # the matrix opened without &cka= (Results, a job link, a bare permalink) shows the measure it was launched with
    bare = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    bare.query_params["run"] = run_id
    bare.run().switch_page("views/similarity.py").run()
    assert not bare.exception and not bare.error
    assert bare.selectbox(key="sim_measure").value == "procrustes" and bare.checkbox(key="sim_cka").value
    assert any("Procrustes distance" in c.proto.spec for c in bare.get("plotly_chart"))
    results = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    results.query_params["run"] = run_id
    results.run().switch_page("views/results.py").run()
    assert not results.exception and not results.error
    assert any("Procrustes distance" in c.proto.spec for c in results.get("plotly_chart"))
    (link,) = [p for p in results.get("page_link") if p.proto.label == "Open on the Similarity page"]
    assert link.proto.page == "similarity" and link.proto.query_string == f"run={run_id}&cka={cka_id}"


def test_coarse_cut_set_and_empty_choice(app):
    at = app.run().switch_page("views/similarity.py").run()
    at.radio(key="sim_cutset").set_value("choose").run()
    at.multiselect(key="sim_cuts_b").set_value([]).run()
    assert at.button(key="sim_launch").disabled
    assert any("Launch is disabled: choose at least one cut" in c.value for c in at.caption)
    at.radio(key="sim_cutset").set_value("coarse").run()
    assert not at.button(key="sim_launch").disabled


def test_a_link_to_a_model_pair_picks_the_models(app):
    app.query_params.update({"a": "zoo:cnn-digits-s1", "b": "zoo:cnn-digits-s0?init=random"})
    at = app.run().switch_page("views/similarity.py").run()
    assert not at.exception
    assert at.selectbox(key="sim_pick_a").value == "zoo:cnn-digits-s1"
    assert at.text_input(key="sim_ref_b").value == "zoo:cnn-digits-s0?init=random"  # not in the list: typed


def test_a_link_to_a_matrix_of_every_sender_into_chosen_receivers_fills_the_form_with_that_matrix(app):
    at = app.run().switch_page("views/similarity.py").run()
    at.radio(key="sim_cutset").set_value("choose").run()
    at.multiselect(key="sim_cuts_b").set_value(["fc2"]).run()  # every sender (the default), one receiver
    at.checkbox(key="sim_cka").uncheck().run()
    at.button(key="sim_launch").click().run()
    run_id = at.query_params["run"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    spec = ui.get_store().lookup(run_id).spec
    assert spec["senders"] is None and spec["receivers"] == ["fc2"]  # all picked = every cut, as "all" says
    assert ui.get_runner().wait(run_id, timeout=180).state == "done"

    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    fresh.query_params["run"] = run_id
    fresh.run().switch_page("views/similarity.py").run()
    assert not fresh.exception
    assert fresh.multiselect(key="sim_cuts_a").value == ["block1", "block2", "flatten", "fc1", "fc2"]
    assert fresh.multiselect(key="sim_cuts_b").value == ["fc2"]
    assert not fresh.button(key="sim_launch").disabled
    assert any("In the store already" in c.value for c in fresh.caption)  # the form is that very run


def test_recipe_sets_the_papers_stitch_and_an_old_closed_form_control_is_labelled(app):
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.matrix import MatrixSpec

    at = app.run().switch_page("views/similarity.py").run()
    at.selectbox(key="sim_recipe").set_value("hernandez").run()
    assert at.radio(key="sim_mode").value == "trained"
    assert (at.selectbox(key="sim_kind").value, at.selectbox(key="sim_resample").value,
            at.selectbox(key="sim_init").value, at.selectbox(key="sim_objective").value) == (
        "linear", "strided", "random", "task")  # fmt: skip
    at.selectbox(key="sim_objective").set_value("match")  # the copy task
    at.number_input(key="sim_max_train").set_value(200)
    at.checkbox(key="sim_cka").uncheck()
    at.radio(key="sim_cutset").set_value("choose").run()
    at.multiselect(key="sim_cuts_a").set_value(["block1"])
    at.multiselect(key="sim_cuts_b").set_value(["block2"]).run()
    at.button(key="sim_launch").click().run()
    assert not at.exception and not at.error
    run_id = at.query_params["run"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    spec = ui.get_store().lookup(run_id).spec
    assert spec["mode"] == "trained" and spec["objective"] == "match"
    assert spec["adapter"] | {"rank": None} == {"kind": "linear", "norm": "both", "resample": "strided",
                                                "init": "random", "rank": None}  # fmt: skip
    assert ui.get_runner().wait(run_id, timeout=180).state == "done"

    # a closed-form matrix whose controls were fitted as its cells (as every such run stored before): its random
    # receiver and both-random panels say they cannot differ from chance, and why
    old = MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", senders=("fc1",), receivers=("fc2",), controls=True,
                     control_training="as-matrix", max_train=200)  # fmt: skip
    rec = run_experiment("matrix", old, ui.get_store()).record
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    fresh.query_params["run"] = rec.id
    fresh.run().switch_page("views/similarity.py").run()
    assert not fresh.exception
    assert fresh.selectbox(key="sim_control_training").value == "as-matrix"  # the form holds that very run
    warned = [w.value for w in fresh.warning]  # so the form says it beside Launch, and the panels say it too
    assert len(warned) == 4 and all("Cannot differ from chance" in w for w in warned)
    assert any("random receiver" in w for w in warned) and any("both random" in w for w in warned)
    titles = " ".join(c.proto.spec for c in fresh.get("plotly_chart"))
    assert titles.count("chance by construction") == 2


def test_a_link_whose_cka_names_no_similarity_run_says_so_and_shows_the_matrix(app):
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.matrix import MatrixSpec

    matrix = run_experiment("matrix", MatrixSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", senders=("fc1",),
                                                 receivers=("fc2",)), ui.get_store()).record  # fmt: skip
    at = app.run().switch_page("views/similarity.py")
    at.query_params.update({"run": matrix.id, "cka": "nonsense"})
    at.run()
    assert not at.exception and not at.error
    assert any("similarity run `nonsense` is not a similarity run in this store" in w.value for w in at.warning)
    assert at.get("plotly_chart")  # the matrix itself is drawn


def test_a_similarity_run_shows_its_calibrated_map_first_then_raw_values_and_an_old_run_its_raw_maps(app):
    """A similarity run alone: the map against random-init Bs by default, cells within their range ringed; the
    switch gives the raw maps.  A run with one untrained twin (stored before the seeds) has no spread: its raw maps
    are drawn whichever is picked, and the page says why."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.similarity import SimilaritySpec

    cuts = {"senders": ("block1", "fc2"), "receivers": ("block1", "fc2"), "max_samples": 256}
    new = run_experiment("similarity", SimilaritySpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", **cuts),
                         ui.get_store()).record  # fmt: skip
    at = app.run().switch_page("views/similarity.py")
    at.query_params["run"] = new.id
    at.run()
    assert not at.exception and not at.error
    (chart,) = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert chart["layout"]["title"]["text"].startswith("Linear CKA, beyond random-init B")
    z = next(t for t in chart["data"] if t.get("name") == "values")["z"]
    assert z == new.summary["random_null"]["calibrated"]
    ringed = next(t for t in chart["data"] if t.get("name") == "marked")  # block1 x block1: architecture alone
    assert [0, 0] in [[x, y] for x, y in zip(ringed["x"], ringed["y"])]
    assert any(c.value.startswith("Calibrated map: each cell is trained B's value in standard deviations of 5 "
                                  "untrained Bs") for c in at.caption)  # fmt: skip
    at.radio(key="sim_simview").set_value("raw").run()
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert "Linear CKA" in titles and len(titles) == 4  # with the baseline, untrained Bs, dependence test
    words = " ".join(c.value for c in at.caption)
    assert "Dependence test (shuffled images; 20 permutations of B's images against A's)" in words
    assert "Any two networks fed the same images pass it" in words and "Calibrated map" not in words

    old = run_experiment("similarity", SimilaritySpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s1", **cuts,
                                                      random_null_seeds=1), ui.get_store()).record  # fmt: skip
    page = app.run().switch_page("views/similarity.py")
    page.query_params["run"] = old.id
    page.run()
    assert not page.exception and not page.error
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in page.get("plotly_chart")]
    assert "Linear CKA" in titles and len(titles) == 4
    assert any("One untrained B has no spread: no calibrated map." in c.value for c in page.caption)
    assert not [r for r in page.radio if r.key == "sim_simview"]  # nothing to switch to


def test_a_link_fills_the_matrix_form_and_the_mode_greys_out_what_the_spec_leaves_unused(app):
    """The matrix form is the matrix kind's declared fields: a link names any of them (held in what the form
    offers, with a note), the spec's rule for the mode greys out what it leaves unused, and a refusal offers the
    change that makes the form valid."""
    app.query_params.update({"mode": "trained", "epochs": "5", "seeds": "99", "senders": "fc1,block2"})
    at = app.run().switch_page("views/similarity.py").run()
    assert not at.exception
    assert (at.radio(key="sim_mode").value, at.number_input(key="sim_epochs").value,
            at.number_input(key="sim_seeds").value) == ("trained", 5, 10)  # fmt: skip
    assert any("seeds=99 is outside 1 to 10: using 10" in w.value for w in at.warning)
    assert at.radio(key="sim_cutset").value == "choose" and at.multiselect(key="sim_cuts_a").value == ["fc1", "block2"]
    assert not at.selectbox(key="sim_objective").disabled and not at.number_input(key="sim_seeds").disabled
    assert at.checkbox(key="sim_noise_sender").disabled  # without controls: the spec holds it
    at.radio(key="sim_mode").set_value("proxy").run()
    assert at.checkbox(key="sim_controls").disabled and at.number_input(key="sim_epochs").disabled
    assert at.selectbox(key="sim_objective").disabled and at.number_input(key="sim_seeds").disabled
    at.radio(key="sim_mode").set_value("closed-form").run()
    at.selectbox(key="sim_init").set_value("random").run()  # a closed-form matrix fits: refused, with the fix
    assert any("init must be one of" in e.value for e in at.error)
    (fix,) = [b for b in at.button if b.key == "sim_fix"]
    fix.click().run()
    assert at.radio(key="sim_mode").value == "trained" and not at.error
