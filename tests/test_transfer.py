"""Issue 43, part 2: a probe and class directions carried from A's cut through a fitted stitch into B's.

Outcomes that could have come out otherwise: through the fitted adapter A's probe reads B's deep layer about as
well as a probe fitted on B, while the same probe through a random-init adapter of the same shape falls to near
chance; the carried class directions steer B's output about as B's own do, the random adapter's not at all.
"""

from __future__ import annotations

import json

import pytest
import torch

from stitchcore.errors import StitchError
from stitchcore.experiments import new_spec, run_experiment
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.measures.transfer import carried_probe, fit_probe
from stitchcore.report.figures import FIGURES
from stitchcore.store.results import Store


@pytest.fixture(scope="module")
def cnns(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("transfer") / "store")
    refs = [run_experiment("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=s), store).record.summary["ref"]
            for s in (0, 1)]
    return store, *refs


def test_a_probe_carried_through_the_fitted_adapter_reads_b_and_a_random_adapter_does_not(cnns, capsys):
    from stitchcore.cli.main import main

    store, a, b = cnns
    argv = ["transfer", "--a", a, "--b", b, "--cut-a", "fc1", "--cut-b", "fc1", "--store", str(store.root),
            "--json", "--quiet"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    for side in ("transferred", "native", "random_adapter"):
        lo, hi = out[f"{side}_ci"]
        assert lo <= out[side] <= hi, side
    assert out["native"] > 0.9 and out["transferred"] > 0.9 * out["native"]
    assert out["random_adapter"] < out["chance"] + 0.3 and out["above_random_ci"][0] > 0.3
    steer = out["steering"]
    assert steer["native"] > 0.1 and steer["transferred"] > 0.5 * steer["native"]
    assert abs(steer["random_adapter"]) < 0.1 * steer["native"]
    assert out["verdict"].startswith("carried")
    assert main(argv[:-2]) == 0
    assert "fc1 -> fc1" in capsys.readouterr().out


def test_along_depth_every_coarse_cut_gets_a_point_and_the_figures_draw_them(cnns):
    store, a, b = cnns
    rec = run_experiment("transfer", new_spec("transfer", {"a": a, "b": b, "max_train": 600, "max_test": 300}),
                         store).record
    points = rec.summary["points"]
    assert [p["cut_a"] for p in points] == ["block1", "block2", "flatten", "fc1", "fc2"]
    assert all(p["cut_b"] == p["cut_a"] for p in points)  # two CNNs: the same depth is the same layer
    assert points[-1]["ratio"] > points[0]["ratio"]  # deep layers carry the classes across better than block1
    assert [f.name for f in FIGURES["transfer"](rec, store)] == ["transfer-accuracy", "transfer-ratio"]


def test_refusals_name_the_fix(cnns):
    store, a, b = cnns
    with pytest.raises(StitchError, match="cut_a with cut_b"):
        new_spec("transfer", {"a": a, "b": b, "cut_b": "fc1"})
    with pytest.raises(StitchError, match="one layout"):
        run_experiment("transfer", new_spec("transfer", {"a": a, "b": b, "cut_a": "block1", "cut_b": "fc1"}), store)


def test_the_read_backs_recover_a_probe_through_an_exact_adapter():
    g = torch.Generator().manual_seed(1)
    y = torch.arange(300) % 3
    a = torch.randn(300, 5, generator=g) + torch.nn.functional.one_hot(y, 5)[:, :5].float() * 3
    m, t = torch.randn(7, 5, generator=g), torch.randn(7, generator=g)
    probe = fit_probe(a, y, 3)
    b = a @ m.T + t
    assert torch.equal(carried_probe(probe, m, t).predict(b), probe.predict(a))  # the pseudo-inverse: exactly
    ridged = carried_probe(probe, m, t, a).predict(b)  # the ridge read-back shrinks a little towards A's mean
    assert (ridged == probe.predict(a)).float().mean() > 0.95
