"""Tests for stitchcore.plots: traces, axes, colours and edge inputs of every figure builder."""

from __future__ import annotations

import json
import logging
import math
import re

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from stitchcore.experiments.assemble import pareto_front
from stitchcore.plots import assemble as plots_assemble
from stitchcore.plots import heatmap as plots_heatmap
from stitchcore.plots import runs as plots
from stitchcore.plots.heatmap import TICK_LIMIT, cell_of_point
from stitchcore.plots.runs import ROLE_COLORS

DIGIT_CUTS = [
    {"name": "block1", "shape": [16, 4, 4], "layout": "map", "depth": 0.2},
    {"name": "block2", "shape": [32, 2, 2], "layout": "map", "depth": 0.4},
    {"name": "flatten", "shape": [128], "layout": "vector", "depth": 0.6},
    {"name": "fc1", "shape": [64], "layout": "vector", "depth": 0.8},
    {"name": "fc2", "shape": [32], "layout": "vector", "depth": 1.0},
]
SERIES = {
    "loss": [(5, 2.1), (10, 1.7), (15, 0.9), (20, 0.12)],
    "test_accuracy": [(0, 0.31), (22, 0.93)],
    "lr": [(5, 0.01)],
}
SUMMARY = {
    "accuracy": 0.9311, "base": {"a": 0.9583, "b": 0.9611}, "penalty": 0.03, "start_accuracy": 0.8,
    "per_class": [0.95, None, 0.9], "per_class_base": {"a": [0.98, 0.99, 0.95], "b": [0.97, 1.0, None]},
    "classes": ["0", "1", "2"], "params": 544, "flops": 8704, "lstsq_residual": 0.21,
    "cut_a": DIGIT_CUTS[0], "cut_b": DIGIT_CUTS[1], "history": [], "seconds": 1.0,
}  # fmt: skip


def _check(fig: go.Figure) -> dict:
    """Every figure: a Figure, JSON-serialisable, house template, titled axes."""
    assert isinstance(fig, go.Figure)
    data = json.loads(fig.to_json())
    assert fig.layout.template == pio.templates[plots.TEMPLATE]
    assert fig.layout.xaxis.title.text
    assert fig.layout.yaxis.title.text
    assert fig.layout.height and 250 <= fig.layout.height <= 900
    return data


def _notes(fig: go.Figure) -> list[str]:
    return [a.text for a in fig.layout.annotations]


# -- training_curves ---------------------------------------------------------------------------


def test_training_curves_two_axes_and_log_loss():
    fig = plots.training_curves(SERIES, title="run")
    _check(fig)
    loss, acc = fig.data
    assert (loss.name, acc.name) == ("loss", "test accuracy")
    assert list(loss.x) == [5, 10, 15, 20] and list(acc.y) == [0.31, 0.93]
    assert loss.yaxis == "y" and acc.yaxis == "y2"
    assert fig.layout.yaxis.type == "log"  # 2.1 / 0.12 > 10x
    assert fig.layout.yaxis2.title.text == "test accuracy" and tuple(fig.layout.yaxis2.range) == (0, 1.02)
    assert fig.layout.xaxis.title.text == "optimizer step"
    assert "step" in loss.hovertemplate and "%{y" in acc.hovertemplate
    assert fig.layout.title.text == "run"


def test_training_curves_log_ticks_thin_out_over_many_decades():
    fig = plots.training_curves({"loss": [(5, 2.3), (10, 0.01), (15, 7e-6)]})
    ticks = list(fig.layout.yaxis.ticktext)
    assert ticks == ["1e-5", "1e-4", "0.001", "0.01", "0.1", "1"]  # powers of ten, written in full
    narrow = plots.training_curves(SERIES)
    assert list(narrow.layout.yaxis.ticktext) == ["0.1", "0.2", "0.5", "1", "2"]


def test_training_curves_linear_when_narrow_and_nan_is_a_gap():
    fig = plots.training_curves({"loss": [(5, 1.0), (10, math.nan), (15, 0.5)]})
    _check(fig)
    assert fig.layout.yaxis.type != "log"
    assert list(fig.data[0].y) == [1.0, None, 0.5]


@pytest.mark.parametrize("series", [{}, {"loss": [], "test_accuracy": []}])
def test_training_curves_empty_waits(series):
    fig = plots.training_curves(series)
    _check(fig)
    assert len(fig.data) == 0
    assert plots.WAITING in _notes(fig)


def test_training_curves_single_series_and_single_point():
    only_acc = plots.training_curves({"test_accuracy": [(0, 0.3)]})
    _check(only_acc)
    assert [t.name for t in only_acc.data] == ["test accuracy"] and "markers" in only_acc.data[0].mode
    one = plots.training_curves({"loss": [(5, 2.2)]})
    _check(one)
    assert one.data[0].mode == "markers"  # a lone point must be visible
    assert plots.WAITING not in _notes(one)


# -- compare_curves ----------------------------------------------------------------------------


def test_compare_curves_one_trace_per_run_with_stable_colours():
    runs = [("seed 0", SERIES), ("empty", {}), ("seed 2", {"loss": [(5, 2.0), (10, 1.0)]})]
    fig = plots.compare_curves(runs)
    _check(fig)
    assert [t.name for t in fig.data] == ["seed 0", "seed 2"]
    assert fig.data[1].line.color == plots.RUN_COLORS[2]  # colour by position, not by drawn order
    assert fig.layout.yaxis.title.text == "loss"
    acc = plots.compare_curves(runs, "test_accuracy")
    _check(acc)
    assert acc.layout.yaxis.tickformat == ".0%" and [t.name for t in acc.data] == ["seed 0"]


def test_compare_curves_long_run_labels_go_under_the_plot_not_over_the_title():
    short = plots.compare_curves([("seed 0", SERIES), ("seed 1", SERIES)])
    assert short.layout.legend.y == 1.0 and short.layout.height == plots.HEIGHT  # one row beside the title
    labels = ["zoo:cnn-digits-s0[block2] -> zoo:cnn-digits-s1[block2] (linear, lstsq) · 5a03d9",
              "zoo:cnn-digits-s1 · 20b2ab", "zoo:vit-digits-s0-adamw-ffda8d · ffda8d"]  # a report's comparison
    fig = plots.compare_curves([(label, SERIES) for label in labels], title="Training loss")
    _check(fig)
    legend = fig.layout.legend
    assert (legend.yref, legend.y, legend.yanchor, legend.orientation) == ("container", 0.0, "bottom", "h")
    rows = 3  # each long label a row at the narrowest width
    assert fig.layout.height == plots.HEIGHT + rows * 20 and fig.layout.margin.b >= 56 + rows * 20


def test_compare_curves_empty():
    fig = plots.compare_curves([], metric="loss")
    _check(fig)
    assert fig.data == () and any("no loss" in n for n in _notes(fig))


# -- accuracy_bars / per_class_bars ------------------------------------------------------------


def test_accuracy_bars_roles_colours_and_penalty():
    fig = plots.accuracy_bars(SUMMARY)
    _check(fig)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bars] == ["A", "B", "stitched"]
    assert [t.marker.color for t in bars] == [ROLE_COLORS["a"], ROLE_COLORS["b"], ROLE_COLORS["stitched"]]
    assert [t.y[0] for t in bars] == [0.9583, 0.9611, 0.9311]
    assert any("+3.0 pts" in n for n in _notes(fig))
    assert any(t.type == "scatter" and t.y[0] == 0.8 for t in fig.data)  # before-training marker


def test_accuracy_bars_penalty_computed_negative_and_missing_base():
    s = dict(SUMMARY, accuracy=0.97, penalty=None, start_accuracy=None)
    fig = plots.accuracy_bars(s)
    _check(fig)
    assert any("−0.9 pts" in n for n in _notes(fig))  # B − stitched = 0.9611 − 0.97
    partial = plots.accuracy_bars({"accuracy": 0.5, "base": {"a": None, "b": None}})
    _check(partial)
    assert [t.name for t in partial.data] == ["stitched"] and not _notes(partial)


def test_per_class_bars_skips_none():
    fig = plots.per_class_bars(SUMMARY)
    data = _check(fig)
    by = {t.name: t for t in fig.data}
    assert list(by) == ["A", "B", "stitched"]
    assert list(by["stitched"].x) == ["0", "2"] and list(by["B"].x) == ["0", "1"]
    assert by["stitched"].marker.color == ROLE_COLORS["stitched"]
    assert fig.layout.barmode == "group" and fig.layout.xaxis.title.text == "class"
    assert "pts vs B" in by["stitched"].customdata[0]
    assert data["layout"]["xaxis"]["type"] == "category"  # class "0" stays a label


def test_per_class_bars_without_classes_or_values():
    fig = plots.per_class_bars({"per_class": [0.5, 0.7], "per_class_base": {}})
    _check(fig)
    assert list(fig.data[0].x) == ["0", "1"]
    empty = plots.per_class_bars({"per_class": [None, None]})
    _check(empty)
    assert empty.data == () and _notes(empty)


# -- cut_diagram -------------------------------------------------------------------------------


def test_cut_diagram_digits_labels_layouts_and_marks():
    fig = plots.cut_diagram(DIGIT_CUTS, marked={"block1": "sender", "fc1": "receiver"}, title="cnn")
    _check(fig)
    boxes = {t.name: t for t in fig.data if t.showlegend is not False}
    assert list(boxes) == ["map (C×H×W)", "vector (D)"]
    assert list(boxes["map (C×H×W)"].x) == [0, 1] and list(boxes["vector (D)"].x) == [2, 3, 4]
    assert list(boxes["map (C×H×W)"].y) == [256, 128]
    assert list(boxes["map (C×H×W)"].text) == ["16×4×4", "32×2×2"]
    assert list(fig.layout.xaxis.ticktext) == [c["name"] for c in DIGIT_CUTS]
    assert fig.layout.yaxis.type == "log"
    outline = [t for t in fig.data if t.showlegend is False]
    assert len(outline) == 1 and list(outline[0].x) == [0, 3]
    assert {"sender", "receiver"} <= {n.replace("<b>", "").split("<")[0] for n in _notes(fig)}


def test_cut_diagram_many_cuts_hover_only(caplog):
    cuts = [
        {"name": f"blocks.{i}", "shape": [196, 384] if i % 2 else [14, 14, 384],
         "layout": "tokens" if i % 2 else "map_nhwc", "depth": (i + 1) / 60}
        for i in range(60)
    ]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="stitchcore.plots.runs"):
        fig = plots.cut_diagram(cuts, marked=["blocks.59", "nope"])
    _check(fig)
    assert "nope" in caplog.text
    assert all(t.text is None for t in fig.data)
    assert fig.layout.xaxis.ticktext is None and "hover" in fig.layout.xaxis.title.text
    assert sum(len(t.x) for t in fig.data if t.showlegend is not False) == 60
    assert all("%{customdata[0]}" in t.hovertemplate for t in fig.data if t.showlegend is not False)
    assert [a.xanchor for a in fig.layout.annotations] == ["right"]  # last cut: caption grows inwards


RESNET_SHAPES = [
    ("conv1", [64, 112, 112]), ("bn1", [64, 112, 112]), ("act1", [64, 112, 112]), ("maxpool", [64, 56, 56]),
    ("layer1.0", [64, 56, 56]), ("layer1.1", [64, 56, 56]), ("layer2.0", [128, 28, 28]),
    ("layer2.1", [128, 28, 28]), ("layer3.0", [256, 14, 14]), ("layer3.1", [256, 14, 14]),
    ("layer4.0", [512, 7, 7]), ("layer4.1", [512, 7, 7]), ("global_pool", [512]),
]  # fmt: skip
RESNET_CUTS = [{"name": n, "shape": shape, "layout": "map", "depth": (i + 1) / 13}
               for i, (n, shape) in enumerate(RESNET_SHAPES)]  # fmt: skip


def test_cut_diagram_long_names_slant_and_wide_shapes_run_up_inside_their_boxes():
    """A ResNet's 13 cuts: names slanted with room below for the longest; shapes like 64×112×112 are wider
    than their boxes, so they run up inside them at a readable size (never below 9 px: hidden, on hover)."""
    fig = plots.cut_diagram(RESNET_CUTS, title="Cut points")
    _check(fig)
    assert fig.layout.xaxis.tickangle == -45 and list(fig.layout.xaxis.ticktext)[-1] == "global_pool"
    boxes = [t for t in fig.data if t.showlegend is not False]
    assert all(t.textposition == "inside" and t.textangle == -90 for t in boxes)
    assert "64×112×112" in boxes[0].text and fig.layout.uniformtext.minsize == 9
    assert fig.layout.margin.b >= 46 + 0.71 * plots.text_px("global_pool")  # the slanted longest name fits
    assert fig.layout.height == 340 + fig.layout.margin.b - 56  # the plot keeps its height
    vit = [{"name": n, "shape": [17, 64], "layout": "tokens", "depth": 0.1}
           for n in ("patch_embed", "pos_drop", "blocks.0", "blocks.1", "blocks.2", "blocks.3", "norm")]
    vit = plots.cut_diagram([*vit, {"name": "head_drop", "shape": [64], "layout": "vector", "depth": 1.0}])
    assert vit.layout.xaxis.tickangle == -45  # 8 cuts, but "patch_embed" would run into "pos_drop"
    assert all(t.textposition == "outside" for t in vit.data)  # 17×64 fits on its box
    cnn = plots.cut_diagram(DIGIT_CUTS)
    assert cnn.layout.xaxis.tickangle == 0 and cnn.layout.margin.b == 56  # short names: level, no extra room


def test_cut_diagram_empty():
    fig = plots.cut_diagram([])
    _check(fig)
    assert "no cuts" in _notes(fig)


# -- assemble: accuracy vs FLOPs ------------------------------------------------------------------


def _assembled(accuracy_flops: list[tuple[float, int]]) -> list[dict]:
    return [{"sender": f"s{i}", "receiver": "r", "recipe": "linear/both/bilinear", "adapter": "linear",
             "resample": "bilinear", "accuracy": acc, "flops": flops, "skipped_reason": None, "same_as": None}
            for i, (acc, flops) in enumerate(accuracy_flops)]  # fmt: skip


def test_accuracy_vs_flops_without_an_assembled_network_on_the_front_says_so():
    base = {"a": {"ref": "zoo:a", "accuracy": 0.97, "flops": 1000},
            "b": {"ref": "zoo:b", "accuracy": 0.95, "flops": 5000}}  # fmt: skip
    cells = _assembled([(0.6, 2000), (0.9, 3000)])  # A alone beats both
    front = pareto_front([*cells, *base.values()])
    assert front == [2]
    fig = plots_assemble.accuracy_vs_flops(cells, base, front)
    _check(fig)
    assert "Pareto front" not in [t.name for t in fig.data]  # nothing drawn, nothing in the legend
    words = plots_assemble.front_words(len(cells), base, front)
    assert words and "A alone beats every one" in words
    assert any("A alone beats every one" in n for n in _notes(fig))
    # one cell cheaper than A: it and A form a front, drawn and named; no sentence
    cells = _assembled([(0.6, 500), (0.9, 3000)])
    front = pareto_front([*cells, *base.values()])
    assert front == [0, 2]
    fig = plots_assemble.accuracy_vs_flops(cells, base, front)
    assert "Pareto front" in [t.name for t in fig.data]
    assert plots_assemble.front_words(len(cells), base, front) is None and not _notes(fig)
    # A and B split the front between them: each network is beaten by one of them
    both = {"a": {**base["a"], "accuracy": 0.8}, "b": {**base["b"], "accuracy": 0.99}}
    cells = _assembled([(0.7, 2000), (0.9, 6000)])
    front = pareto_front([*cells, *both.values()])
    assert front == [2, 3]
    assert "beaten by A or B alone" in plots_assemble.front_words(len(cells), both, front)
    assert "Pareto front" in [t.name for t in plots_assemble.accuracy_vs_flops(cells, both, front).data]


# -- heatmap -----------------------------------------------------------------------------------


def test_heatmap_orientation_blanks_and_hover():
    rows, cols = ["block1", "block2"], ["0", "1", "fc2"]
    fig = plots_heatmap.heatmap([[0.9, None, 0.1], [0.5, math.nan, 0.2]], rows, cols, title="acc")
    _check(fig)
    hm = fig.data[0]
    assert fig.layout.yaxis.autorange == "reversed"  # rows[0] at the top
    assert list(hm.y) == [0, 1] and list(fig.layout.yaxis.ticktext) == rows
    assert list(fig.layout.xaxis.ticktext) == cols  # names like "0" stay labels
    assert hm.z[0][1] is None and hm.z[1][1] is None and hm.hoverongaps is False
    assert tuple(hm.customdata[0][2]) == ("block1", "fc2")
    assert "sender (A)" in hm.hovertemplate and "receiver (B)" in hm.hovertemplate
    assert fig.layout.yaxis.title.text == "sender (A)" and fig.layout.xaxis.title.text == "receiver (B)"
    assert hm.texttemplate == "%{z:.2f}"


def test_heatmap_diverging_symmetric():
    fig = plots_heatmap.heatmap([[0.3, -0.1], [0.05, 0.0]], ["a", "b"], ["c", "d"], title="debiased", diverging=True)
    _check(fig)
    hm = fig.data[0]
    assert hm.zmid == 0 and hm.zmin == -hm.zmax and hm.zmax == pytest.approx(0.3)
    given = plots_heatmap.heatmap([[0.3]], ["a"], ["c"], title="t", diverging=True, zmin=-0.1, zmax=0.5).data[0]
    assert (given.zmin, given.zmax) == (-0.5, 0.5)
    plain = plots_heatmap.heatmap([[0.3]], ["a"], ["c"], title="t", zmin=0, zmax=1).data[0]
    assert (plain.zmin, plain.zmax) == (0, 1) and plain.zmid is None


def test_heatmap_large_thins_ticks_and_drops_cell_text():
    names = [f"blocks.{i}" for i in range(60)]
    fig = plots_heatmap.heatmap([[0.5] * 60 for _ in range(60)], names, names, title="swin")
    _check(fig)
    assert fig.data[0].texttemplate is None
    assert len(fig.layout.xaxis.tickvals) <= TICK_LIMIT and fig.layout.yaxis.ticktext[0] == "blocks.0"


def test_clickable_heatmap_has_one_selectable_marker_per_cell():
    rows, cols = ["block1", "fc1"], ["block1", "block2", "fc2"]
    fig = plots_heatmap.heatmap([[0.9, None, 0.1], [0.5, 0.4, 0.2]], rows, cols, title="acc", clickable=True)
    heat, cells = fig.data
    assert heat.hoverinfo == "skip" and cells.type == "scatter" and len(cells.x) == 6
    assert fig.layout.clickmode == "event+select"
    k = 1 * 3 + 2  # row fc1, column fc2
    assert (cells.x[k], cells.y[k]) == (2, 1) and list(cells.customdata[k]) == ["fc1", "fc2", 0.2]
    assert cell_of_point({"customdata": list(cells.customdata[k])}) == ("fc1", "fc2")
    assert cell_of_point({"customdata": None}) is None and cell_of_point({}) is None
    assert len(plots_heatmap.heatmap([[0.5]], ["a"], ["b"], title="t").data) == 1  # not clickable: the heat map only


def test_heatmap_module_doctests():
    import doctest

    assert doctest.testmod(plots_heatmap).failed == 0


def test_heatmap_bad_shape_and_empty():
    with pytest.raises(ValueError, match="expected 2 rows x 2 columns"):
        plots_heatmap.heatmap([[1.0, 2.0]], ["a", "b"], ["c", "d"], title="t")
    fig = plots_heatmap.heatmap([[None]], ["a"], ["b"], title="t", diverging=True)
    _check(fig)
    assert "no values yet" in _notes(fig)


# -- penalty_vs_depth --------------------------------------------------------------------------


def test_penalty_vs_depth_groups_sorted():
    pts = [
        {"label": "s0→s1", "depth": 0.6, "penalty": 0.02, "cut": "flatten"},
        {"label": "s0→s1", "depth": 0.2, "penalty": 0.01, "cut": "block1"},
        {"label": "random", "depth": 0.2, "penalty": 0.5},
        {"label": "random", "depth": 0.4, "penalty": None},
    ]
    fig = plots.penalty_vs_depth(pts)
    _check(fig)
    assert [t.name for t in fig.data] == ["s0→s1", "random"]
    assert list(fig.data[0].x) == [0.2, 0.6] and list(fig.data[0].customdata) == ["block1", "flatten"]
    assert list(fig.data[1].y) == [50.0]  # stored 0.5 (B − stitched), drawn in points
    assert fig.layout.xaxis.title.text == "depth"
    assert fig.layout.yaxis.title.text == "penalty = B − stitched (pts, higher = worse)"
    other = plots.penalty_vs_depth([{"g": 1, "x": 1, "loss": 2.0}], x="x", y="loss", group="g")
    _check(other)
    assert other.layout.yaxis.title.text == "loss" and other.data[0].name == "1"


def test_penalty_vs_depth_empty():
    fig = plots.penalty_vs_depth([])
    _check(fig)
    assert fig.data == () and _notes(fig)


def test_accuracy_bars_before_training_marker_is_clear_of_the_value_label():
    """The diamond sits on the stitched bar's edge, not on its centred value label; its words are in the
    axis label (a text inside a 0.6-wide bar was clipped), and a start close to the end changes nothing."""
    fig = plots.accuracy_bars(dict(SUMMARY, start_accuracy=0.9301))
    (marker,) = [t for t in fig.data if t.name == "stitched before training"]
    (stitched,) = [t for t in fig.data if t.name == "stitched"]
    assert marker.mode == "markers" and abs(marker.x[0] - stitched.x[0]) >= stitched.width / 2
    assert "before training 93.0%" in fig.layout.xaxis.ticktext[2]


# -- skipped and pending cells, CSV ------------------------------------------------------------


def _trace(fig: go.Figure, name: str):
    (t,) = [t for t in fig.data if t.name == name]
    return t


def test_heatmap_marks_skipped_cells_with_their_reason():
    rows, cols = ["block1", "fc1"], ["block1", "fc2"]
    why = {("fc1", "block1"): "a vector sender cannot feed a spatial receiver"}
    fig = plots_heatmap.heatmap([[0.9, 0.8], [None, 0.7]], rows, cols, title="acc", skipped=why)
    _check(fig)
    values, skipped = fig.data
    assert values.z[1][0] is None
    assert skipped.z[1][0] == 1.0 and skipped.z[0][0] is None and skipped.z[1][1] is None  # only that cell
    assert list(skipped.customdata[1][0]) == ["fc1", "block1", why["fc1", "block1"]]  # the reason, on hover
    assert "skipped: %{customdata[2]}" in skipped.hovertemplate and skipped.showscale is False
    assert [list(r) for r in skipped.text] == [["", ""], ["×", ""]] and plots_heatmap.SKIPPED_MARK == "×"
    assert {c for _, c in skipped.colorscale} == {plots_heatmap.SKIPPED_COLOR}  # one flat grey
    # a value given for a skipped cell is not drawn, and a skipped cell cannot be clicked open
    clicked = plots_heatmap.heatmap([[0.9, 0.8], [0.1, 0.7]], rows, cols, title="acc", skipped=why, clickable=True)
    assert clicked.data[0].z[1][0] is None
    cells = _trace(clicked, "cells")
    assert len(cells.x) == 3 and ["fc1", "block1"] not in [list(c[:2]) for c in cells.customdata]


def test_heatmap_pending_cells_look_different_from_skipped_ones():
    why = {("fc1", "block1"): "vector into a map"}
    fig = plots_heatmap.heatmap([[None, 0.8], [None, None]], ["block1", "fc1"], ["block1", "fc2"], title="live",
                                skipped=why, pending="not computed yet")  # fmt: skip
    skipped, pending = _trace(fig, "skipped"), _trace(fig, "pending")
    assert [[c[2] for c in r] for r in pending.customdata] == [["not computed yet", ""], ["", "not computed yet"]]
    assert [list(r) for r in pending.text] == [["…", ""], ["", "…"]] and [list(r) for r in skipped.text] == [
        ["", ""], ["×", ""]]  # fmt: skip
    assert {c for _, c in pending.colorscale} == {"rgba(0,0,0,0)"}  # blank (white), not the skipped grey
    assert pending.textfont.color != skipped.textfont.color
    assert [t.name for t in plots_heatmap.heatmap([[None]], ["a"], ["b"], title="t").data] == ["values"]


def test_heatmap_csv_header_and_values():
    import csv
    import io

    text = plots_heatmap.heatmap_csv([[0.123456789, None], [1.0, -0.25]], ["block1", "fc1"], ["block2", "fc2"])
    table = list(csv.reader(io.StringIO(text)))
    assert table[0] == ["sender (A) \\ receiver (B)", "block2", "fc2"]
    assert table[1] == ["block1", "0.123456789", ""] and table[2] == ["fc1", "1.0", "-0.25"]
    assert len(table) == 3
    assert float(table[1][1]) == 0.123456789  # exact
    assert plots_heatmap.heatmap_csv([[math.nan]], ["a"], ["b"]).splitlines()[1] == "a,"
    with pytest.raises(ValueError, match="2 rows x 1 columns"):
        plots_heatmap.heatmap_csv([[1.0]], ["a", "b"], ["c"])


# -- which way is worse: one convention --------------------------------------------------------


def _scale_ends(trace) -> tuple[str, str]:
    """The colours at the low and the high end of a trace's colour scale."""
    scale = list(trace.colorscale)
    return scale[0][1].upper(), scale[-1][1].upper()


def test_penalty_colorscale_words_and_label():
    from stitchcore.plots import penalty_colorscale, penalty_label, penalty_words
    from stitchcore.plots.penalty import BETTER_COLOR, NEUTRAL_COLOR, WORSE_COLOR, worse_end

    assert penalty_words(True) == "higher = worse" and penalty_words(False) == "lower = worse"
    up, down = penalty_colorscale(True), penalty_colorscale(False)
    assert (up[0][1], up[-1][1]) == (BETTER_COLOR, WORSE_COLOR)  # higher is worse: the high end is red
    assert (down[0][1], down[-1][1]) == (WORSE_COLOR, BETTER_COLOR)
    assert up[len(up) // 2] == [0.5, NEUTRAL_COLOR] and [p for p, _ in up] == sorted(p for p, _ in up)
    assert worse_end(up) == worse_end(down) == WORSE_COLOR
    assert (WORSE_COLOR, BETTER_COLOR) == ("#B2182B", "#2166AC")  # ColorBrewer RdBu's red and blue ends
    with pytest.raises(ValueError):
        worse_end([[0, "#000"], [1, "#fff"]])
    assert penalty_label("penalty", "B − stitched") == "penalty = B − stitched (pts, higher = worse)"


def test_one_unit_and_one_direction_for_both_penalties():
    """Stored fractions in each paper's sign; shown times 100 and higher = worse, the same number everywhere."""
    from stitchcore.lm.evaluate import loss_penalty
    from stitchcore.plots.penalty import format_pct, format_pts, loss_penalty_pct, penalty_pts

    assert penalty_pts(0.006667) == 0.6667 and format_pts(penalty_pts(0.006667)) == "+0.7 pts"
    assert format_pts(penalty_pts(-0.04)) == "−4.0 pts" and format_pts(None) == "—"
    worse = loss_penalty(2.0, 2.5)  # the GPT-2 report's (L_base − L) / L_base: −0.25, lower = worse
    better = loss_penalty(2.0, 1.5)
    assert worse < 0 < better
    assert loss_penalty_pct(worse) == 25.0 and loss_penalty_pct(better) == -25.0  # shown: higher = worse
    assert format_pct(loss_penalty_pct(worse)) == "+25.0 %" and format_pct(loss_penalty_pct(0.0)) == "+0.0 %"


def test_every_penalty_heatmap_is_red_where_worse():
    from stitchcore.plots import lm as plots_lm
    from stitchcore.plots.penalty import WORSE_COLOR

    image = plots_heatmap.heatmap([[0.3, -0.1]], ["a"], ["b", "c"], title="penalty", diverging=True,
                                  higher_is_worse=True, value_label="penalty")  # fmt: skip
    assert _scale_ends(image.data[0])[1] == WORSE_COLOR  # high penalty (B − stitched) = red
    assert "higher = " in image.data[0].colorbar.title.text and "worse" in image.data[0].colorbar.title.text
    assert "(higher = worse)" in image.data[0].hovertemplate
    debiased = plots_heatmap.heatmap([[0.3, -0.1]], ["a"], ["b", "c"], title="debiased", diverging=True,
                                     higher_is_worse=False)  # fmt: skip
    assert _scale_ends(debiased.data[0])[0] == WORSE_COLOR  # below 0: the trained model does worse than the control
    lm = plots_lm.penalty_heatmap({"rows": ["drop", "h.0"], "cols": ["drop", "h.0"], "values": [[-0.1, 0], [0, None]]})
    assert _scale_ends(lm.data[0])[1] == WORSE_COLOR  # loss penalty as shown: higher (a higher loss) = worse
    assert lm.data[0].z[0][0] == 10.0  # stored −0.1 (10% above the base's loss) drawn as +10 %
    assert "(%, higher = worse)" in re.sub("<[^>]+>", "", lm.data[0].colorbar.title.text)
    neutral = plots_heatmap.heatmap([[0.3]], ["a"], ["c"], title="t", diverging=True).data[0]
    assert WORSE_COLOR not in _scale_ends(neutral)  # a difference with no better / worse is not red-blue


def test_penalty_heat_maps_carry_unit_and_direction_on_colour_bar_hover_and_csv():
    """The matrix penalty panel, the debiased panel and the LM heat map: values times 100, the unit and the
    direction on the colour bar and in the hover, cells printed as the cards write them, CSV named."""
    from stitchcore.experiments.matrix import ControlTable
    from stitchcore.plots import lm as plots_lm
    from stitchcore.report.figures import control_panels, figure_csv, panel_figure, stitching_panel

    panel = stitching_panel([[0.006667, None], [-0.04, 0.5]], ["fc1", "fc2"], ["fc1", "fc2"], "penalty")
    fig = panel_figure(panel)
    values = _trace(fig, "values")
    assert [list(r) for r in values.z] == [[0.6667, None], [-4.0, 50.0]]
    scale = re.sub("<[^>]+>", "", values.colorbar.title.text.replace("<br>", " · "))
    assert scale == "penalty · (pts, higher = worse)"
    assert values.texttemplate == "%{z:+.1f}" and values.hovertemplate.endswith("%{z:+.1f} pts<extra></extra>")
    assert "penalty (pts, higher = worse): " in values.hovertemplate
    cells = _trace(fig, "cells")  # the clickable markers hover the same text
    assert "penalty (pts, higher = worse): %{customdata[2]:+.1f} pts" in cells.hovertemplate
    assert fig.layout.title.text == "Stitching penalty = B − stitched (pts, higher = worse)"
    assert panel.csv().splitlines()[:2] == ["penalty_pts: sender (A) \\ receiver (B),fc1,fc2", "fc1,0.6667,"]
    assert figure_csv(fig).splitlines()[0] == "penalty_pts: sender (A) \\ receiver (B),fc1,fc2"

    table = ControlTable("random_sender", "random sender", [[0.1]], [[0.27]])
    debiased = panel_figure(control_panels(table, ["fc1"], ["fc2"])[1])
    assert _trace(debiased, "values").z[0][0] == 27.0
    assert "(pts, lower = worse)" in re.sub("<[^>]+>", "", _trace(debiased, "values").colorbar.title.text)
    assert control_panels(table, ["fc1"], ["fc2"])[1].csv().startswith("debiased_pts: ")

    lm = plots_lm.penalty_heatmap({"rows": ["drop"], "cols": ["drop", "h.0"], "values": [[-0.25, 0.1]]})
    assert list(lm.data[0].z[0]) == [25.0, -10.0]
    assert lm.data[0].hovertemplate.endswith("%{z:+.1f} %<extra></extra>")
    assert figure_csv(lm).startswith("loss_penalty_pct: ")


def _worse_words(fig: go.Figure) -> dict[str, tuple[float, str]]:
    """'worse' / 'better' annotation -> (paper y, colour)."""
    out = {}
    for a in fig.layout.annotations:
        for word in ("worse", "better"):
            if a.text and a.text.endswith(word):
                out[word] = (a.y, a.font.color)
    return out


def test_penalty_line_plots_say_which_way_is_worse_in_words_and_units():
    from stitchcore.plots import lm as plots_lm
    from stitchcore.plots import traits as plots_traits
    from stitchcore.plots.penalty import WORDS_COLOR
    from stitchcore.report.figures import figure_csv

    image = plots.penalty_vs_depth([{"label": "s", "depth": 0.2, "penalty": 0.1}])
    assert image.layout.yaxis.title.text == "penalty = B − stitched (pts, higher = worse)"
    # the words say it, in grey: the lines' own colours (orange, blue ...) mean nothing about worse / better
    assert _worse_words(image) == {"worse": (1.0, WORDS_COLOR), "better": (0.0, WORDS_COLOR)}
    assert all(a.x == 1.0 and a.xanchor == "left" for a in image.layout.annotations)  # right of the lines
    assert image.layout.margin.r >= 70
    assert figure_csv(image).splitlines() == ["trace,x,penalty_pts", "s,0.2,10.0"]
    lm = plots_lm.penalty_by_depth([{"label": "merge, head A", "split": 0, "loss_penalty": -0.2, "cut": "drop"},
                                    {"label": "merge, head A", "split": 1, "loss_penalty": 0.05, "cut": "h.0"}])
    assert lm.layout.yaxis.title.text == "loss penalty = (L − L_base) / L_base<br>(% of base loss, higher = worse)"
    assert list(lm.data[0].y) == [20.0, -5.0]  # a loss 20% above the base's is drawn high: worse
    assert _worse_words(lm) == {"worse": (1.0, WORDS_COLOR), "better": (0.0, WORDS_COLOR)}
    assert "(L_base − L) / L_base is this with the sign flipped" in lm.layout.legend.title.text.replace("<br>", " ")
    assert figure_csv(lm).splitlines()[:2] == ["trace,x,loss_penalty_pct", '"merge, head A",0,20.0']
    curves = {"positions": ["block1", "fc1"], "stitched": {"accuracy": [0.6, 0.9]},
              "control": {"accuracy": {"min": [0.1, 0.1], "max": [0.2, 0.3], "mean": [0.15, 0.2]}}}  # fmt: skip
    sweep = plots_traits.penalty_curve(curves, {"b": {"metrics": {"accuracy": 0.95}}})
    _check(sweep)
    line = _trace(sweep, "stitched")
    assert list(line.y) == [pytest.approx(35.0), pytest.approx(5.0)]  # B − stitched, in points
    assert "pts" in line.hovertemplate
    band = _trace(sweep, "random-init control")
    assert max(band.y) == pytest.approx(85.0) and min(band.y) == pytest.approx(65.0)
    assert sweep.layout.yaxis.title.text == "penalty = B − stitched (pts, higher = worse)"
    assert _worse_words(sweep) == {"worse": (1.0, WORDS_COLOR), "better": (0.0, WORDS_COLOR)}
    assert figure_csv(sweep).splitlines()[0] == "trace,x,penalty_pts"
    lines = plots_traits.penalty_lines([{"title": "s1 -> s0", "positions": ["fc1"], "penalty": [0.013]}])
    assert lines.data[0].y == (1.3,) and lines.layout.yaxis.title.text.endswith("(pts, higher = worse)")
    assert lines.data[0].error_y.array is None  # a sweep stored before intervals: drawn as it was
    spans = plots_traits.penalty_lines([{"title": "s1 -> s0", "positions": ["fc1", "fc2"], "penalty": [0.013, 0.05],
                                         "penalty_ci": [[0.004, 0.024], None]}])  # fmt: skip
    assert spans.data[0].error_y.array == (1.1, None) and spans.data[0].error_y.arrayminus == (0.9, None)
    assert spans.data[0].customdata == ("fc1 [+0.4, +2.4]", "fc2")  # the hover names the interval
    assert figure_csv(spans).splitlines() == ["trace,x,penalty_pts,penalty_pts_lo,penalty_pts_hi",
                                              "s1 -> s0,fc1,1.3,0.4,2.4", "s1 -> s0,fc2,5.0,,"]  # fmt: skip
    one = plots_traits.penalty_curve({**curves, "penalty_ci": [[0.0, 0.1]] * len(curves["positions"])},
                                     {"b": {"metrics": {"accuracy": 0.95}}})  # fmt: skip
    drawn = next(t for t in one.data if t.name == "stitched")
    assert drawn.error_y.array is not None and all(a >= 0 for a in drawn.error_y.array if a is not None)
    missing = plots_traits.penalty_curve({"positions": ["fc1"], "stitched": {"class_acc:3": [0.5]}}, {})
    assert any("accuracy metric" in n for n in _notes(missing))


# -- simplicity: which way is simpler, and no normalising by noise -------------------------------------------


def _simplicity_case(a: dict, b: dict, stitched: dict) -> tuple[dict, dict]:
    positions = ["block1", "block2", "flatten", "fc1", "fc2"]
    curves = {"positions": positions, "simplicity": stitched}
    return curves, {"a": {"simplicity": a}, "b": {"simplicity": b}}


# The distributed preset's A and B (measured, fixed seeds): gzip sizes 0.05% apart, sharpness apart by less than
# its draw noise; normalised by those differences the curves swung from -1.15 to +1.96 (gzip 0.81 .. 1.77).
_NEAR = _simplicity_case(
    {"grad_norm": 3.48525, "sharpness": -0.00323298, "sharpness_std": 0.05195, "draws": 5, "gzip_bits": 459192},
    {"grad_norm": 0.464785, "sharpness": 0.0103442, "sharpness_std": 0.001569, "draws": 5, "gzip_bits": 459400},
    {"grad_norm": [0.9875, 2.5153, 2.5356, 4.9323, 5.0385], "sharpness": [0.0232, 0.0105, 0.0044, -0.0163, 0.026],
     "gzip_bits": [459400, 459232, 459232, 459032, 459208]},
)  # fmt: skip


def test_raw_simplicity_axes_say_lower_is_simpler():
    from stitchcore.plots import traits as plots_traits

    fig = plots_traits.simplicity_curves(*_NEAR)
    titles = [fig.layout[f"yaxis{k}"].title.text for k in ("", "2", "3")]
    assert [t.replace("<br>", " ") for t in titles] == ["‖∇L‖₂ (lower = simpler)", "mean loss increase (lower = simpler)",
                                                        "bits (lower = simpler)"]  # fmt: skip
    assert "lower = simpler" in fig.layout.title.text


def test_normalised_simplicity_skips_measures_whose_a_and_b_differ_by_less_than_their_noise():
    from stitchcore.plots import traits as plots_traits
    from stitchcore.report.figures import figure_csv

    fig = plots_traits.simplicity_curves(*_NEAR, normalized=True)
    _check(fig)
    drawn = [t.name for t in fig.data if t.mode == "lines+markers"]
    assert drawn == ["gradient norm (lower = simpler)"]  # A's 3.49 vs B's 0.46: B is simpler, 1 = like A
    (note,) = [a.text for a in fig.layout.annotations if a.name == "no-normalised-curve"]
    assert "sharpness: A and B differ by less than their noise (|A − B| = 0.0136 vs 0.0465)" in note
    assert "gzip size (bits): A and B differ by less than their noise (|A − B| = 208 bits vs 2,296 bits)" in note
    assert note.count("no normalised curve") == 2
    assert {r.split(",")[0] for r in figure_csv(fig).splitlines()[1:]} == {
        "gradient norm (lower = simpler)", "A alone (1)", "B alone (0)"}  # no gzip or sharpness numbers either

    # the simplicity preset: A (L1 + pruning) is far sparser than B, so gzip gets its curve; higher = like A = simpler
    curves, ref = _simplicity_case({"grad_norm": 0.983, "sharpness": 0.0185, "sharpness_std": 0.0151, "draws": 5,
                                    "gzip_bits": 105480},
                                   {"grad_norm": 0.459, "sharpness": 0.0080, "sharpness_std": 0.0138, "draws": 5,
                                    "gzip_bits": 459840},
                                   {"grad_norm": [2.6] * 5, "sharpness": [0.1] * 5,
                                    "gzip_bits": [456952, 352272, 352272, 163136, 113376]})  # fmt: skip
    fig = plots_traits.simplicity_curves(curves, ref, normalized=True)
    gzip = _trace(fig, "gzip size (bits) (higher = simpler)")
    assert gzip.y[0] == pytest.approx(0.0081, abs=1e-4) and gzip.y[-1] == pytest.approx(0.9777, abs=1e-4)
    assert "gradient norm (lower = simpler)" in [t.name for t in fig.data]

    # nothing told apart: no curve at all, and the plot says why in its middle too
    same = {"grad_norm": 1.0, "sharpness": 0.01, "sharpness_std": 0.01, "draws": 5, "gzip_bits": 1000}
    fig = plots_traits.simplicity_curves(*_simplicity_case(same, dict(same, grad_norm=1.2), {}), normalized=True)
    assert not [t for t in fig.data if t.mode == "lines+markers"]
    assert any("differ by less than their noise" in n and "no normalised curve" in n for n in _notes(fig))


def test_normalisation_noise_floors():
    from stitchcore.plots.traits import SIMPLICITY_NOISE, normalization_noise

    assert normalization_noise("grad_norm", {"grad_norm": 1.0}, {}) is None
    diff, floor = normalization_noise("grad_norm", {"grad_norm": 1.2}, {"grad_norm": 0.8})
    assert diff == pytest.approx(0.4) and floor == pytest.approx(SIMPLICITY_NOISE["grad_norm"] * 1.0)
    # sharpness: 2 standard errors of A − B over the draws; a stored run without sharpness_std has no floor
    diff, floor = normalization_noise("sharpness", {"sharpness": 0.03, "sharpness_std": 0.02, "draws": 4},
                                      {"sharpness": 0.01, "sharpness_std": 0.02, "draws": 4})  # fmt: skip
    assert diff == pytest.approx(0.02) and floor == pytest.approx(2 * (2 * 0.02**2 / 4) ** 0.5)
    assert normalization_noise("sharpness", {"sharpness": 0.03}, {"sharpness": 0.01})[1] == 0.0
