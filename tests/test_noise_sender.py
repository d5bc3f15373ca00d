"""The noise-sender control (issue 39; "Functional Alignment Can Mislead", ICML 2025) in sweeps, stitches, the
CLI, the estimates and the pages: the same adapter trained from class-clustered noise of A's activation shape and
scale.  On the digits CNNs it stitches far above chance at a late cut (the paper's point), so a stitch there is
evidence about A's layers only where it beats it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from stitchcore.errors import StitchError
from stitchcore.experiments import run_experiment, spec_from_record
from stitchcore.experiments.estimate import estimate_seconds
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.sweep import SweepSpec, partial_positions
from stitchcore.measures.intervals import unpack_outcomes
from stitchcore.plots.traits import penalty_curve, trait_curves
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.store.results import Store, run_id_for
from tests.conftest import ROOT, copy_store, run_cli

OLD_STORE = Path(__file__).resolve().parent / "fixtures" / "store_v1"  # written before the noise sender
OLD_STITCH, OLD_SWEEP = "6d9f490702433fc1", "2daff2acaae2878b"
CHANCE = 0.1  # ten digit classes
# small and fast: a closed-form start (least squares onto B's activations) and one epoch on 400 images
QUICK = dict(adapter=AdapterSpec(init="lstsq"), epochs=1, max_train=400, max_test=200)


def _sweep(refs: list[str], **kw) -> SweepSpec:
    return SweepSpec(refs[0], refs[1], **{"positions": ("block1", "fc1"), "control": False, "simplicity": False,
                                          **QUICK, **kw})


def test_a_sweep_stores_the_noise_sender_far_above_chance_at_a_late_cut_and_draws_it(trained_store):
    store, refs = trained_store
    out = run_experiment("sweep", _sweep(refs), store)
    s = out.record.summary
    ns = s["noise_sender"]
    assert s["positions"] == ["block1", "fc1"]
    # the paper's point: noise that knows only the label stitches into B's late layers (measured: 0.97 at fc1)
    assert ns["accuracy"][1] >= 0.6 > 3 * CHANCE
    assert ns["metrics"]["accuracy"] == ns["accuracy"]
    for k in range(2):  # every value with its interval; the penalty and the margin paired over the same images
        lo, hi = ns["accuracy_ci"][k]
        assert lo <= ns["accuracy"][k] <= hi
        b_right = unpack_outcomes(s["reference"]["b"]["outcomes"])
        noise_right = unpack_outcomes(s["rows"][k]["noise_sender"]["outcomes"])
        stitched_right = unpack_outcomes(s["rows"][k]["outcomes"])
        assert ns["penalty"][k] == pytest.approx(float(b_right.mean() - noise_right.mean()), abs=1e-6)
        assert ns["margin"][k] == pytest.approx(float(stitched_right.mean() - noise_right.mean()), abs=1e-6)
        assert ns["margin"][k] == pytest.approx(s["stitched"]["accuracy"][k] - ns["accuracy"][k], abs=1e-6)
        assert ns["penalty_ci"][k][0] <= ns["penalty"][k] <= ns["penalty_ci"][k][1]
        assert ns["margin_ci"][k][0] <= ns["margin"][k] <= ns["margin_ci"][k][1]
    assert partial_positions(store, out.record.id)["noise_sender"] == ns  # what a running sweep's page reads
    # the figures: a dashed grey line beside the stitched curve, and its penalty beside the stitched penalty
    traces = {t.name: t for t in trait_curves(s, s["reference"], s["metrics"]).data}
    assert traces["noise sender"].line.dash == "dash" and list(traces["noise sender"].y) == ns["accuracy"]
    pen = {t.name: t for t in penalty_curve(s, s["reference"]).data}
    assert list(pen["noise sender"].y) == [pytest.approx(100 * p) for p in ns["penalty"]]
    # switched off: the same sweep without it, another run id
    off = run_experiment("sweep", _sweep(refs, noise_control=False), store).record
    assert off.id != out.record.id and off.summary["noise_sender"] is None
    assert "noise_sender" not in off.summary["rows"][0]
    assert off.summary["stitched"] == s["stitched"]  # the stitch itself is what it was


def test_a_stitch_reports_its_noise_sender_and_the_cli_prints_it(trained_store, tmp_path, capsys):
    store, refs = trained_store
    spec = StitchSpec(a=refs[0], b=refs[1], cut_a="fc1", cut_b="fc1", **QUICK)
    s = run_experiment("stitch", spec, store).record.summary
    noise = s["controls"]["noise_sender"]
    assert set(noise) >= {"accuracy", "accuracy_ci", "penalty", "penalty_ci", "margin", "margin_ci"}
    assert noise["accuracy"] >= 0.6  # measured: 0.96, above the stitch's own 0.94 on these 200 images
    assert noise["penalty"] == pytest.approx(s["base"]["b"] - noise["accuracy"], abs=1e-6)
    assert noise["margin"] == pytest.approx(s["accuracy"] - noise["accuracy"], abs=1e-6)
    assert noise["accuracy_ci"][0] <= noise["accuracy"] <= noise["accuracy_ci"][1]
    assert noise["margin_ci"][0] <= noise["margin"] <= noise["margin_ci"][1]
    argv = ["stitch", "--a", refs[0], "--b", refs[1], "--cut-a", "fc1", "--cut-b", "fc1", "--init", "lstsq",
            "--epochs", "1", "--max-train", "400", "--max-test", "200"]  # fmt: skip
    code, out, _ = run_cli([*argv, "--json"], store.root, capsys)
    assert code == 0 and json.loads(out)["controls"]["noise_sender"] == noise  # the run above, from the store
    code, out, _ = run_cli(argv, store.root, capsys)
    assert code == 0 and f"noise sender {noise['accuracy']:.4f}" in out and "stitched - noise" in out
    code, out, _ = run_cli([*argv, "--no-noise-control", "--json"], store.root, capsys)
    assert code == 0 and "controls" not in json.loads(out)


def test_stored_runs_without_the_field_read_as_no_control_and_keep_their_ids(tmp_path):
    root = tmp_path / "store"
    copy_store(OLD_STORE, root)
    with Store(root) as store:
        for rid, cls in ((OLD_STITCH, StitchSpec), (OLD_SWEEP, SweepSpec)):
            rec = store.lookup(rid)
            assert "noise_control" not in rec.spec
            spec = spec_from_record(rec)
            assert isinstance(spec, cls) and spec.noise_control is False
            assert run_id_for(rec.kind, spec.to_dict()) == rid
            assert cls.new(rec.spec).noise_control is True  # the same fields written today: with the control
        assert partial_positions(store, OLD_SWEEP)["noise_sender"] is None
    with pytest.raises(StitchError, match="noise_control .* is true or false"):
        StitchSpec(a="zoo:x", b="zoo:y", cut_a="fc1", cut_b="fc1", noise_control="no")


def test_estimates_count_the_noise_senders_training(trained_store, no_background_calibration):
    store, refs = trained_store
    stitch = StitchSpec(a=refs[0], b=refs[1], cut_a="block2", cut_b="block2", seed=71)
    with_noise, without = (estimate_seconds("stitch", StitchSpec(**{**stitch.__dict__, "noise_control": on}), store)
                           for on in (True, False))  # fmt: skip
    assert with_noise.seconds > without.seconds  # one calibration (noise_control only scales): arithmetic
    sweep = SweepSpec(refs[0], refs[1], positions=("fc1", "fc2"), seed=71, simplicity=False)
    both = [estimate_seconds("sweep", SweepSpec(**{**sweep.__dict__, "noise_control": on}), store)
            for on in (True, False)]  # fmt: skip
    assert both[0].seconds > both[1].seconds
    assert "6 stitches" in both[1].basis and "8 stitches" in both[0].basis and "noise sender" in both[0].basis


def _page(params: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "views" / "stitch.py"), default_timeout=90)
    at.query_params.update(params)
    return at.run()


def test_the_stitch_pages_checkbox_round_trips_through_a_link(app):
    import ui

    at = app.run().switch_page("views/stitch.py").run()
    assert at.checkbox(key="noise_control").value is True  # today's default
    assert any("· noise-sender control" in c.value for c in at.caption)  # "Launch runs ..." reads the spec
    at.checkbox(key="noise_control").uncheck().run()
    assert not any("noise-sender control" in c.value for c in at.caption)
    off = _page({"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "noise_control": "false"})
    assert not off.exception and off.checkbox(key="noise_control").value is False
    assert not any("noise-sender control" in c.value for c in off.caption)
    # a run's link fills the form from its spec, and its card shows the noise sender beside the stitched accuracy
    for on in (False, True):
        spec = StitchSpec(a="zoo:cnn-digits-s0", b="zoo:cnn-digits-s1", cut_a="fc1", cut_b="fc1", noise_control=on,
                          **QUICK)  # fmt: skip
        rec = run_experiment("stitch", spec, ui.get_store()).record
        page = _page({"run": rec.id})
        assert not page.exception and page.checkbox(key="noise_control").value is on
        shown = {m.label: m.value for m in page.metric}
        if on:
            noise = rec.summary["controls"]["noise_sender"]
            assert shown["Noise sender"] == f"{noise['accuracy']:.1%}"
            assert any("Noise sender: a sender of class-clustered noise" in c.value for c in page.caption)
        else:
            assert "Noise sender" not in shown and "controls" not in rec.summary
    bad = _page({"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "noise_control": "maybe"})
    assert bad.checkbox(key="noise_control").value is True
    assert any("noise_control='maybe' is not true or false: using true" in w.value.replace("\\", "")
               for w in bad.warning)  # fmt: skip


def test_the_sweep_view_says_what_the_noise_sender_is(trained_store, app):
    import ui

    at = app.run()
    store, refs = ui.get_store(), trained_store[1]
    rid = run_experiment("sweep", _sweep(refs, positions=("fc1",)), store).record.id
    at.switch_page("views/traits.py")
    at.query_params["run"] = rid
    at.run()
    assert not at.exception
    said = [c.value for c in at.caption if "Noise sender (dashed grey)" in c.value]
    assert said and "a stitch that does no better is not evidence about A's layers" in said[0]
    assert "noise sender" in " ".join(c.proto.spec for c in at.get("plotly_chart"))
