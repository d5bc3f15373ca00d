"""Settings and verdict thresholds chosen on validation data by a rule in code (issue 39): the rules
(stitchcore.measures.selection) pick what they should, and the constants the presets and findings use are what
the rules pick from the committed validation measurements (bench/settings_chosen.json)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from stitchcore.experiments.trait_presets import TASK_EPOCHS
from stitchcore.measures.selection import Choice, noise_margin, plateau

ROOT = Path(__file__).resolve().parents[1]
CHOSEN = json.loads((ROOT / "bench" / "settings_chosen.json").read_text())


def _bench(name: str):
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plateau_takes_the_smallest_budget_whose_whole_curve_is_at_the_longest_ones():
    curves = {5: [0.1, 0.5, 0.9], 10: [0.1, 0.70, 0.95], 20: [0.12, 0.78, 0.96], 40: [0.12, 0.8, 0.97]}
    assert plateau(curves, tolerance=0.03).value == 20  # 10 is 0.10 off at the middle point
    assert plateau(curves, tolerance=0.11).value == 10
    assert plateau(curves, tolerance=0.0).value == 40  # nothing smaller levels off: the reference itself
    assert plateau({3: [0.2], 1: [0.2]}, tolerance=0.0).value == 1  # order of the keys does not matter
    c = plateau(curves, tolerance=0.03)
    assert c.evidence["gaps"] == {"5": 0.3, "10": 0.1, "20": 0.02, "40": 0.0} and c.evidence["reference"] == 40
    for bad in ({}, {1: [0.1], 2: [0.1, 0.2]}, {1: []}):
        with pytest.raises(ValueError):
            plateau(bad, tolerance=0.1)
    with pytest.raises(ValueError, match="tolerance"):
        plateau(curves, tolerance=-0.1)


def test_noise_margin_is_the_coverage_quantile_of_null_sizes_rounded_up():
    nulls = [0.001 * k * (-1) ** k for k in range(1, 21)]  # sizes 0.001 .. 0.020
    assert noise_margin(nulls, coverage=0.95, step=0.005).value == 0.02  # the 19th of 20 is 0.019 -> 0.02
    assert noise_margin(nulls, coverage=0.5, step=0.005).value == 0.01  # the 10th is 0.010, already a multiple
    assert noise_margin(nulls, coverage=1.0, step=0.001).value == 0.02
    assert noise_margin([0.0, 0.0], step=0.005).value == 0.0
    got = noise_margin([0.003, -0.012], coverage=0.95, step=0.005)
    assert isinstance(got, Choice) and got.value == 0.015 and got.evidence["n"] == 2  # few nulls: the largest
    for args in (([],), ([0.1], 0.0), ([0.1], 1.5), ([0.1], 0.95, 0.0)):
        with pytest.raises(ValueError):
            noise_margin(*args)


def test_the_committed_choices_follow_from_their_evidence():
    tol = CHOSEN["task_epochs"]["evidence"]["tolerance_from"]
    curves = {int(e): c for e, c in CHOSEN["task_epochs"]["evidence"]["curves"].items()}
    assert plateau(curves, tol["value"]).value == CHOSEN["task_epochs"]["value"]
    assert CHOSEN["validation"] == "digits|val300s0" and not {0, 10, 20} & set(CHOSEN["validation_seeds"])


def test_the_code_uses_the_settings_chosen_on_validation_data():
    assert TASK_EPOCHS == CHOSEN["task_epochs"]["value"], "rerun bench/settings_chosen.py or update TASK_EPOCHS"
    assert _bench("findings_bansal").EQUIVALENCE == CHOSEN["equivalence"]["value"]
