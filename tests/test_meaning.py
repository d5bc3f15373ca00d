"""What a number means (stitchcore/measures/meaning.py): every measure and metric has one line, and every heat map's
colour bar says which way is better and the range."""

from __future__ import annotations

import math
import re

import pytest

from stitchcore.measures import traits
from stitchcore.measures.meaning import Meaning, colorbar_title, explain, list_meanings, meaning
from stitchcore.measures.similarity import get_measure, list_measures

TRAIT_EXAMPLES = ("accuracy", "class_acc:3", "class_acc:3,5", "confusion:3->8", "blackout:left", "decor:right")


def _plain(text: str) -> str:
    """A colour-bar title as read: lines joined by " · ", tags dropped."""
    return re.sub("<[^>]+>", "", text.replace("<br>", " · "))


def _span(low: float, high: float) -> str:
    """How a measure's registered bounds read in its range."""
    def num(v: float) -> str:
        return f"{v:g}".replace("-", "−")

    return f"≤ {num(high)}" if low == -math.inf else f"{num(low)} .. {num(high)}"


@pytest.mark.parametrize("name", list_measures())
def test_every_registered_measure_says_its_direction_and_range(name):
    m, reg = meaning(name), get_measure(name)
    assert isinstance(m, Meaning) and m.title and m.what and m.direction and m.range and m.null
    way = "higher" if reg.higher_is_similar else "lower"
    assert m.direction == f"{way} = more similar"  # the registry's direction, in the table's words
    assert m.range.startswith(_span(*reg.bounds)), (m.range, reg.bounds)
    assert m.direction in _plain(colorbar_title(name))


@pytest.mark.parametrize("family", sorted(traits._PATTERNS))
def test_every_trait_metric_family_has_a_meaning(family):
    m = meaning(family)
    assert m.direction and m.range.startswith("0 .. 1") and m.null  # rates and accuracies


@pytest.mark.parametrize("metric", TRAIT_EXAMPLES)
def test_a_trait_metric_reads_as_its_family(metric):
    assert meaning(traits.parse_metric(metric).key) == meaning(traits.parse_metric(metric).kind)
    assert meaning("class_acc:3").title == "Class accuracy"


def test_the_other_numbers_and_their_sign_conventions():
    from stitchcore.plots import lm as plots_lm
    from stitchcore.plots.penalty import PENALTY_AXIS

    for key in ("calibrated", "accuracy", "penalty", "debiased", "loss", "loss_penalty"):
        m = meaning(key)
        assert m.direction and m.range and m.null, key
    assert meaning("penalty").direction in PENALTY_AXIS  # "higher = worse", as every penalty shows
    assert meaning("loss_penalty").direction in plots_lm.PENALTY_AXIS
    assert "sign flipped" in meaning("loss_penalty").what  # the GPT-2 report's own number, said once
    assert meaning("loss").direction == "lower = better" and meaning("accuracy").direction == "higher = better"
    # calibrated: a distance's score is more similar below 0; an unknown measure's keeps the general words
    assert meaning("calibrated:procrustes").direction == "lower = more similar"
    assert meaning("calibrated:svcca") == meaning("calibrated") == meaning("calibrated:retired-measure")


def test_explanations_are_one_line_and_colour_bars_short():
    for key in list_meanings():
        line = explain(key)
        assert "\n" not in line and line.startswith(meaning(key).title) and " · null: " in line
        bar = colorbar_title(key)
        assert all(len(part) <= 42 for part in bar.split("<br>")), bar
        assert meaning(key).direction in _plain(bar)


def test_an_unknown_key_names_the_known_ones():
    with pytest.raises(KeyError, match="no meaning for 'cka-linera'; known: .*cka-linear.*procrustes"):
        meaning("cka-linera")
    with pytest.raises(KeyError):
        explain("stitched:accuracy")


# ------------------------------------------------------------------------------------------- heat maps


def _bar(fig) -> str:
    values = next(t for t in fig.data if t.name == "values")
    return _plain(values.colorbar.title.text)


@pytest.mark.parametrize("measure", list_measures())
def test_similarity_panels_say_it_on_the_colour_bar(measure):
    from stitchcore.report.figures import cka_panels, panel_figure

    summary = {"measure": measure, "senders": ["a", "b"], "receivers": ["c"], "values": [[0.5], [0.2]],
               "baseline": [[0.1], [0.0]], "calibrated": [[4.0], [-1.0]]}  # fmt: skip
    measured, baseline, calibrated = (panel_figure(p) for p in cka_panels(summary))
    for fig in (measured, baseline):
        assert _bar(fig) == _plain(colorbar_title(measure))
        assert meaning(measure).direction in _bar(fig)
    assert _bar(calibrated) == _plain(colorbar_title(f"calibrated:{measure}"))
    assert "dependence" in _bar(calibrated) and "0 = chance" in _bar(calibrated) and meaning(measure).direction in _bar(calibrated)


def test_a_stored_run_of_a_measure_without_a_meaning_still_draws():
    from stitchcore.report.figures import cka_panels, panel_figure

    fig = panel_figure(cka_panels({"measure": "retired-measure", "senders": ["a"], "receivers": ["b"],
                                   "values": [[0.5]]})[0])  # fmt: skip
    assert _bar(fig) == "similarity"


def test_matrix_panels_say_it_on_the_colour_bar():
    from stitchcore.experiments.matrix import ControlTable
    from stitchcore.report.figures import control_panels, panel_figure, stitching_panel

    grid = [[0.9, None], [0.5, 0.7]]
    accuracy = panel_figure(stitching_panel(grid, ["a", "b"], ["c", "d"], "accuracy"))
    assert _bar(accuracy) == "accuracy · (0 .. 1, higher = better)"
    penalty = panel_figure(stitching_panel([[0.02, -0.01]], ["a"], ["c", "d"], "penalty"))
    assert _bar(penalty) == "penalty · (pts, higher = worse)"  # plots/penalty.py's words, unchanged
    table = ControlTable("random_sender", "random sender", [[0.1, 0.2]], [[0.27, -0.05]])
    control, debiased = (panel_figure(p) for p in control_panels(table, ["a"], ["c", "d"]))
    assert _bar(control) == "accuracy · (0 .. 1, higher = better)"
    assert _bar(debiased) == "Δ accuracy · (pts, lower = worse)"
    red = next(t for t in penalty.data if t.name == "values").colorbar.title.text
    assert "color:#B2182B'>worse" in red  # "worse" stays red on a penalty scale


def test_assemble_recipe_heat_map_takes_the_words():
    from stitchcore.plots.assemble import recipe_heatmap

    cells = [{"sender": "s", "receiver": "r", "recipe": "linear/both/bilinear", "accuracy": 0.8,
              "skipped_reason": None}]  # fmt: skip
    fig = recipe_heatmap(cells, "linear/both/bilinear", ["s"], ["r"], colorbar_title=colorbar_title("accuracy"))
    assert meaning("accuracy").direction in _bar(fig) and "0 .. 1" in _bar(fig)
    assert _bar(recipe_heatmap(cells, "linear/both/bilinear", ["s"], ["r"])) == "accuracy"  # as before


def test_the_assemble_report_figures_carry_it():
    """The report (and Results) draws each recipe's heat map with the accuracy's words."""
    from stitchcore.report.figures import run_figures
    from stitchcore.store.results import RunRecord

    cells = [{"sender": "s", "receiver": "r", "recipe": "linear/both/bilinear", "adapter": "linear",
              "resample": "bilinear", "accuracy": 0.8, "flops": 1000, "skipped_reason": None, "same_as": None}]
    summary = {"cells": cells, "recipes": ["linear/both/bilinear"], "senders": ["s"], "receivers": ["r"],
               "base": {"a": {"ref": "zoo:a", "accuracy": 0.9, "flops": 2000},
                        "b": {"ref": "zoo:b", "accuracy": 0.95, "flops": 3000}}}  # fmt: skip
    record = RunRecord("0" * 16, "assemble", {}, "done", summary, None, 0.0, None, None, "x")
    heat = [f for f in run_figures(record, store=None) if f.name == "accuracy-linear-both-bilinear"]
    assert heat and _bar(heat[0].figure) == _plain(colorbar_title("accuracy"))


# ------------------------------------------------------------------------------------------------ pages


def test_pages_explain_their_numbers(app):
    """The Similarity page's measure picker and its caption, and the Traits page's metrics field."""
    at = app.run().switch_page("views/similarity.py").run()
    picker = at.selectbox(key="sim_measure")
    assert picker.help == explain(picker.value)
    picker.set_value("procrustes").run()
    assert at.selectbox(key="sim_measure").help == explain("procrustes")  # the help follows the pick
    assert any(c.value == explain("procrustes") for c in at.caption)

    at.switch_page("views/traits.py").run()
    field = at.text_input(key="tr_metrics")
    assert field.help.startswith(traits.METRIC_HELP)  # each family's direction, as measures/meaning.py says it
    assert all(f"{meaning(f).direction}" in field.help for f in ("accuracy", "class_acc", "confusion", "blackout", "decor"))
