"""The figures of a stored run, one list per kind: what the app's run views draw and the HTML report embeds.

:func:`run_figures` reads a run only through the store and its experiment's readers
(``matrix_state``, ``partial_positions``, ``spec_from_record`` ...) and draws with :mod:`stitchcore.plots`;
each :class:`RunFigure` carries its numbers as CSV (:func:`figure_csv` for line and bar plots, the
matrix layout of :func:`~stitchcore.plots.heatmap.heatmap_csv` for heat maps).  The heat-map panels of
similarity and matrix runs are :class:`HeatPanel` values, so the app's live views draw the same panels.

>>> import plotly.graph_objects as go
>>> print(figure_csv(go.Figure(go.Bar(name="acc", x=["A", "B"], y=[0.9, 0.8]))), end="")
trace,x,y
acc,A,0.9
acc,B,0.8
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import plotly.graph_objects as go

from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.assemble import assembled_cells, pareto_front
from stitchcore.experiments.lm import labelled_points, partial_points
from stitchcore.experiments.lm.cross import CONTROL_WORDS, cross_curves, cross_rows
from stitchcore.experiments.transfer import transfer_points
from stitchcore.experiments.lm.cross_depth import cross_depth_points
from stitchcore.experiments.lm.lmdepth import PENALTY_SERIES
from stitchcore.experiments.matrix import ControlTable, matrix_state
from stitchcore.experiments.similarity import DEPENDENCE_TEST, random_null_map, similarity_map_words
from stitchcore.experiments.sweep import partial_positions
from stitchcore.measures.meaning import colorbar_title, list_meanings, meaning
from stitchcore.measures.similarity import Measure, get_measure, list_measures
from stitchcore.measures.traits import parse_metric
from stitchcore.plots import assemble as plots_assemble
from stitchcore.plots import heatmap as plots_heatmap
from stitchcore.plots import lm as plots_lm
from stitchcore.plots import runs as plots_runs
from stitchcore.plots import traits as plots_traits
from stitchcore.plots import transfer as plots_transfer
from stitchcore.plots.penalty import (
    DEBIASED_COLUMN,
    LOSS_PENALTY_COLUMN,
    PENALTY_AXIS,
    PENALTY_COLUMN,
    PTS,
    grid_of,
    loss_penalty_pct,
    penalty_pts,
)
from stitchcore.store.records import RunRecord
from stitchcore.store.results import Store

__all__ = [
    "COMPARE_METRICS",
    "CURVE_POINTS",
    "FIGURES",
    "PENALTY_WORDS",
    "HeatPanel",
    "RunFigure",
    "cka_panels",
    "compare_figures",
    "control_panels",
    "figure_csv",
    "panel_figure",
    "random_null_panel",
    "run_figures",
    "stitching_panel",
]
__all__ += ["MEASURE_TITLES", "SIMILARITY_VIEWS", "VALUE_LABELS", "measure_choices", "measure_direction",
            "measure_words", "metrics_csv"]

# Similarity measures in words (their titles from measures/meaning.py): the Similarity page's picker (in this
# order) and the heat maps' titles.
MEASURE_TITLES = {m: meaning(m).title for m in ("cka-linear", "cka-rbf", "procrustes", "rsa", "svcca", "ridge-r2",
                                                "knn-jaccard")}  # fmt: skip
VALUE_LABELS = {"cka-linear": "CKA", "cka-rbf": "CKA", "procrustes": "distance", "rsa": "Spearman ρ",
                "svcca": "mean CCA ρ", "ridge-r2": "R²", "knn-jaccard": "Jaccard"}  # colour bar and hover
CURVE_POINTS = 5000  # a finished run's training curve: at most this many points per series
PENALTY_WORDS = PENALTY_AXIS  # "penalty = B − stitched (pts, higher = worse)"
# a similarity run's maps: against random-init Bs (the calibrated map; where the run has a null with a spread) |
# the raw values beside their baselines (the shuffled inputs, the untrained Bs' mean, the dependence test)
SIMILARITY_VIEWS = ("calibrated", "raw")


@dataclass(frozen=True)
class RunFigure:
    """One figure of a run, with the numbers it draws."""

    name: str  # file-name stem of its CSV and image ("accuracy", "training-curve" ...)
    title: str  # what it shows, in words
    figure: go.Figure
    csv: str  # the plotted numbers as CSV text
    caption: str = ""  # how to read it (sign conventions, what the marks mean)


@dataclass(frozen=True)
class HeatPanel:
    """One heat map of a similarity or matrix run, ready to draw (:func:`panel_figure`)."""

    title: str  # the figure's title: says what the panel is
    values: list  # [rows][columns]
    rows: list[str]
    cols: list[str]
    value_label: str  # colour-bar title and hover name of a value
    csv_name: str  # file name stem of the panel's CSV, and its widget key
    diverging: bool = False  # centred at 0 (a penalty or a difference)
    higher_is_worse: bool | None = None  # diverging penalty scales: which way is worse (red)
    unit: str | None = None  # the values' unit ("pts"): on the colour bar and after every hovered value
    csv_value: str | None = None  # what the cells hold, with its unit, in the CSV's corner ("penalty_pts")
    bounded: bool = True  # accuracy / CKA: fixed 0..1 colour range
    value_range: tuple[float, float] | None = None  # fixed colour range instead (diverging: ± its larger end)
    opens: bool = False  # a click on a cell opens that pair on the Stitch page (the app's stitching panel)
    matrix: bool = True  # a stitching panel: skipped cells are marked in it
    intervals: list | None = None  # [rows][columns] of 95% intervals [lo, hi] in the values' units, or None
    meaning: str | None = None  # key of measures.meaning ("penalty", "calibrated:rsa"): its colour-bar words
    marked: Mapping[tuple[str, str], str] | None = None  # cells ringed, with a note on hover (not above control)
    scale: str | None = None  # the colour bar's title written out (lines joined by <br>) where no meaning key says it

    def csv(self) -> str:
        """The panel's numbers, a header of column names then one line per row, then the cells' 95% intervals
        where the panel has them (:func:`heatmap_csv`)."""
        return plots_heatmap.heatmap_csv(self.values, self.rows, self.cols, value_name=self.csv_value,
                                         intervals=self.intervals)


def panel_figure(panel: HeatPanel, *, skipped: Mapping[tuple[str, str], str] | None = None,
                 pending: str | None = None) -> go.Figure:  # fmt: skip
    """The panel's heat map; ``skipped`` pairs and ``pending`` cells are marked in stitching panels only."""
    fixed = panel.bounded and not panel.diverging
    zmin, zmax = panel.value_range or ((0.0, 1.0) if fixed else (None, None))
    return plots_heatmap.heatmap(
        panel.values, panel.rows, panel.cols, title=panel.title, diverging=panel.diverging,
        higher_is_worse=panel.higher_is_worse, clickable=panel.opens, value_label=panel.value_label,
        zmin=zmin, zmax=zmax, unit=panel.unit, csv_value=panel.csv_value,
        text_format="+.1f" if panel.unit == PTS else ".2f",
        skipped=skipped if panel.matrix else None, pending=pending if panel.matrix else None,
        intervals=panel.intervals, colorbar_title=colorbar_title(panel.meaning) if panel.meaning else panel.scale,
        marked=panel.marked,
    )  # fmt: skip


def measure_choices() -> tuple[str, ...]:
    """Every registered measure, those of :data:`MEASURE_TITLES` first, in its order (the page's picker)."""
    return (*MEASURE_TITLES, *(m for m in list_measures() if m not in MEASURE_TITLES))


def _bound(v: float) -> str:
    return f"{v:g}" if math.isfinite(v) else ("−∞" if v < 0 else "∞")


def measure_direction(name: str) -> str:
    """Which way a measure's values mean "more similar", and its range, in words (from the registry).

    >>> measure_direction("procrustes")
    'lower = more similar (0 to 2; 0 for the same representation)'
    >>> measure_direction("ridge-r2")
    'higher = more similar (at most 1; 1 for the same representation)'
    """
    meas = get_measure(name)
    low, high = meas.bounds
    way, same = ("higher", high) if meas.higher_is_similar else ("lower", low)
    span = f"at most {_bound(high)}" if low == -math.inf else f"{_bound(low)} to {_bound(high)}"
    return f"{way} = more similar ({span}; {_bound(same)} for the same representation)"


def _registered(name: str) -> Measure | None:
    try:
        return get_measure(name)
    except StitchError:  # a stored run of a measure this version does not have
        return None


def measure_words(name: str) -> str:
    """:func:`measure_direction` for a stored run's measure, also one this version no longer registers.

    >>> measure_words("retired-measure")
    'a measure this version does not know'
    """
    return measure_direction(name) if _registered(name) is not None else "a measure this version does not know"


def cka_panels(summary: Mapping[str, Any], view: str | None = None) -> list[HeatPanel]:
    """The heat maps of a finished similarity run, by ``view`` (:data:`SIMILARITY_VIEWS`):

    - ``"calibrated"``: the map against random-init Bs alone (:func:`random_null_panel`), where the run has a
      null with a spread (two untrained Bs or more); else, as for runs stored before it, the raw maps;
    - ``"raw"``: the measure, then where the run has them the shuffled-input baseline, the mean of the untrained
      Bs (their 95% range on hover) and the dependence test (shuffled images);
    - None: both, the calibrated map first (a report).

    The colour range follows the measure's registered bounds: fixed 0..1 for [0, 1] measures (CKA, SVCCA,
    k-NN Jaccard); a neutral diverging scale centred at 0 for those that go below 0, fixed at their bounds
    (RSA: -1..1) or, with no lower bound (ridge R²), at -1..1 with lower values saturated (their numbers are
    printed in the cells); the data's range otherwise (Procrustes distance, unknown measures).

    >>> s = {"measure": "cka-linear", "senders": ["x"], "receivers": ["u"], "values": [[0.9]],
    ...      "random_null": {"seeds": 5, "values": [[0.5]], "calibrated": [[8.0]], "threshold": 3.04}}
    >>> [p.title for p in cka_panels(s, "calibrated")]
    ['Linear CKA, beyond random-init B (sds above the mean of 5 untrained Bs)']
    >>> [p.title for p in cka_panels(s, "raw")]
    ['Linear CKA', 'Linear CKA, A against an untrained B (random-init null, mean of 5 seeds)']
    """
    if view not in (None, *SIMILARITY_VIEWS):
        raise ValueError(f"unknown similarity view {view!r}; use one of {', '.join(SIMILARITY_VIEWS)}")
    calibrated = random_null_panel(summary) if view != "raw" else None
    if view == "calibrated" and calibrated is not None:
        return [calibrated]
    return ([calibrated] if calibrated is not None else []) + _raw_panels(summary)


def _raw_panels(summary: Mapping[str, Any]) -> list[HeatPanel]:
    """The measure's values and the maps they are read against (:func:`cka_panels`' ``"raw"``)."""
    measure = summary.get("measure", "cka-linear")
    name = MEASURE_TITLES.get(measure, measure or "similarity")
    meas = _registered(measure)
    label = VALUE_LABELS.get(measure) or ("distance" if meas is not None and not meas.higher_is_similar
                                          else "similarity")  # fmt: skip
    low, high = meas.bounds if meas is not None else (0.0, math.inf)
    value_range, known = None, measure in list_meanings()  # known: its colour bar says what it means
    if low < 0 and math.isfinite(high):
        # RSA: its bounds; ridge R² (no lower bound): -top..top, so "worse than the mean by as much as the best fit
        # is better" saturates (a shuffled baseline's R² of -3 would otherwise wash the real panel out, seen)
        value_range = (low, high) if math.isfinite(low) else (-high, high)
    common = {"rows": summary["senders"], "cols": summary["receivers"], "value_label": label,
              "bounded": (low, high) == (0.0, 1.0), "diverging": low < 0, "value_range": value_range,
              "matrix": False, "meaning": measure if known else None}  # fmt: skip
    panels = [HeatPanel(name, summary["values"], csv_name=measure, intervals=summary.get("values_ci"), **common)]
    if summary.get("baseline"):
        panels.append(HeatPanel(f"{name}, shuffled inputs (baseline)", summary["baseline"],
                                csv_name=f"{measure}-baseline", **common))  # fmt: skip
    twin = summary.get("random_null") or {}
    if twin.get("values"):  # A against untrained Bs: what the architecture and the inputs give alone
        k = int(twin.get("seeds") or len(twin.get("refs") or ()) or 1)
        drawn = f"mean of {k} seeds" if k > 1 else "one seed"
        panels.append(HeatPanel(f"{name}, A against an untrained B (random-init null, {drawn})", twin["values"],
                                csv_name=f"{measure}-untrained-b", intervals=twin.get("ci"), **common))  # fmt: skip
    if summary.get("calibrated"):  # (value - shuffled mean) / shuffled spread: passed by any two nets on one input
        panels.append(HeatPanel(
            f"{name}, {DEPENDENCE_TEST}", summary["calibrated"], summary["senders"], summary["receivers"],
            "shuffled-image sds", csv_name=f"{measure}-dependence-test", diverging=True, bounded=False,
            matrix=False, meaning=f"calibrated:{measure}"))  # fmt: skip
    return panels


def random_null_panel(summary: Mapping[str, Any]) -> HeatPanel | None:
    """The calibrated map of a similarity run: each cell in standard deviations of A against random-init Bs
    above their mean (+ = more similar than an untrained B, also for a distance), the cells within their 95%
    range ringed; None where the run has no null with a spread
    (:func:`~stitchcore.experiments.similarity.random_null_map`).

    >>> p = random_null_panel({"measure": "procrustes", "senders": ["x"], "receivers": ["u", "v"],
    ...     "random_null": {"seeds": 5, "values": [[0.9, 0.8]], "calibrated": [[6.0, 1.0]], "threshold": 3.04}})
    >>> p.values, list(p.marked), p.scale.split("<br>")[0]
    ([[6.0, 1.0]], [('x', 'v')], 'sds vs random-init B')
    """
    cells = random_null_map(summary)
    if cells is None:
        return None
    measure = summary.get("measure", "cka-linear")
    name = MEASURE_TITLES.get(measure, measure or "similarity")
    k, top = cells["seeds"], cells["threshold"]
    return HeatPanel(
        f"{name}, beyond random-init B (sds above the mean of {k} untrained Bs)", cells["grid"],
        summary["senders"], summary["receivers"], "sds vs random-init B", csv_name=f"{measure}-vs-random-b",
        diverging=True, bounded=False, matrix=False, marked=cells["within"] or None,
        scale=(f"sds vs random-init B<br>(+ = more similar than an untrained B; ○ = within 95% of {k} "
               f"untrained Bs, below {top:.2f})"),
    )  # fmt: skip


# a matrix's proxy (its fits' moments): the panel's title and its measures.meaning key
PROXY_PANELS = {"r2": ("Held-out R² of each cell's linear fit (no training)", "fit-r2"),
                "cka": ("Linear CKA of each cell's fit samples (no training)", "fit-cka")}


def stitching_panel(grid: list, senders: list[str], receivers: list[str], metric: str,
                    intervals: list | None = None, seeds: int | None = None) -> HeatPanel:  # fmt: skip
    """The stitching panel of a matrix: accuracy, or the penalty B − stitched in points (higher = worse).

    ``grid`` holds the stored numbers (fractions: ``MatrixState.grid(metric)``); a penalty is shown in points.
    ``intervals``: the cells' 95% intervals (``MatrixState.intervals(metric)``), shown on hover.  ``seeds``: the
    grid is the mean over that many adapter seeds (the title says so; its CSV is named apart).

    >>> stitching_panel([[0.9]], ["fc1"], ["fc2"], "accuracy", seeds=3).title
    'Stitching accuracy, mean over 3 adapter seeds'
    """
    over = f", mean over {seeds} adapter seeds" if seeds else ""
    stem = "-seeds-mean" if seeds else ""
    if metric in PROXY_PANELS:  # the fits' moments (a closed-form or proxy matrix): no interval, no seeds
        title, key = PROXY_PANELS[metric]
        r2 = metric == "r2"  # no lower bound: -1..1, as the ridge-R² similarity panel
        return HeatPanel(title, grid, senders, receivers, meaning(key).label, csv_name=f"proxy-{metric}",
                         opens=True, meaning=key, bounded=not r2, diverging=r2, higher_is_worse=False if r2 else None,
                         value_range=(-1.0, 1.0) if r2 else None)  # fmt: skip
    if metric == "accuracy":
        return HeatPanel(f"Stitching accuracy{over}", grid, senders, receivers, "accuracy", csv_name=f"accuracy{stem}",
                         opens=True, intervals=intervals, meaning="accuracy")  # fmt: skip
    in_pts = None if intervals is None else [[None if ci is None else [penalty_pts(v) for v in ci] for ci in row]
                                             for row in intervals]  # fmt: skip
    return HeatPanel(f"Stitching {PENALTY_WORDS}{over}", grid_of(grid, penalty_pts), senders, receivers, "penalty",
                     csv_name=f"penalty{stem}", diverging=True, higher_is_worse=True, bounded=False,
                     opens=True, unit=PTS, csv_value=PENALTY_COLUMN, intervals=in_pts, meaning="penalty")  # fmt: skip


def control_panels(table: ControlTable, senders: list[str], receivers: list[str]) -> list[HeatPanel]:
    """A control's accuracy and the debiased matrix against it (trained − control, in points: higher = the
    trained bottom adds more than the adapter alone), side by side; the debiased map rings the cells whose 95%
    interval overlaps the control's (``table.overlap``: not distinguishable from it)."""
    panels = []
    what = "accuracy" if table.can_differ else "accuracy; chance by construction"  # see table.note
    if table.values is not None:
        panels.append(HeatPanel(f"Control: {table.name} ({what})", table.values, senders, receivers, "accuracy",
                                csv_name=f"control-{table.control}", meaning="accuracy"))  # fmt: skip
    if table.debiased is not None:
        panels.append(HeatPanel(f"Debiased: trained − {table.name}", grid_of(table.debiased, penalty_pts), senders,
                                receivers, "Δ accuracy", csv_name=f"debiased-{table.control}", diverging=True,
                                higher_is_worse=False, bounded=False, unit=PTS, csv_value=DEBIASED_COLUMN,
                                meaning="debiased", marked=table.overlap or None))  # fmt: skip
    return panels


# ------------------------------------------------------------------------------------------------ CSV


def _axis_names(fig: go.Figure) -> dict[Any, str]:
    """Tick value -> tick text of the first x axis, where a plot draws categories at numeric positions."""
    axis = fig.layout.xaxis
    if axis.tickvals is not None and axis.ticktext is not None:
        return {v: str(t).split("<br>")[0] for v, t in zip(axis.tickvals, axis.ticktext, strict=False)}
    return {}


def _heatmap_csv(fig: go.Figure, trace: go.Heatmap) -> str:
    """A heat map's values in the matrix layout of :func:`heatmap_csv`, named from its cells' custom data."""
    z = [list(r) for r in trace.z]
    custom = trace.customdata
    rows = [str(line[0][0]) for line in custom] if custom is not None else [str(i) for i in range(len(z))]
    cols = [str(cell[1]) for cell in custom[0]] if custom is not None and len(custom) else [str(j) for j in
                                                                                            range(len(z[0]))]
    return plots_heatmap.heatmap_csv(z, rows, cols, row_label=fig.layout.yaxis.title.text or "row",
                                     col_label=fig.layout.xaxis.title.text or "column",
                                     value_name=_csv_value(fig))  # fmt: skip


def _csv_value(fig: go.Figure) -> str | None:
    """What a figure's values are, with their unit (``penalty_pts``), where its builder says (``layout.meta``)."""
    meta = fig.layout.meta
    return meta.get("csv_value") if isinstance(meta, dict) else None


def figure_csv(fig: go.Figure) -> str:
    """A figure's numbers as CSV: a heat map's values as a matrix (a header of column names, one line per
    row), any other plot's traces as long ``trace,x,y`` lines.  Where the figure names its values with
    their unit (``layout.meta["csv_value"]``, e.g. ``penalty_pts``), that name replaces ``y`` (and heads a
    heat map's corner cell): the CSV holds the numbers as the figure shows them.

    Traces that only decorate (overlay marks, ``hoverinfo="skip"``) are left out; categorical x
    positions drawn at numbers come back as their tick labels.
    """
    heat = [t for t in fig.data if isinstance(t, go.Heatmap)]
    if heat:
        return _heatmap_csv(fig, next((t for t in heat if t.name == "values"), heat[0]))
    names = _axis_names(fig)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    value = _csv_value(fig) or "y"
    drawn = [t for t in fig.data if getattr(t, "y", None) is not None and t.hoverinfo != "skip"]
    spans = any(_error_ends(t) for t in drawn)
    writer.writerow(["trace", "x", value, *((f"{value}_lo", f"{value}_hi") if spans else ())])
    for trace in drawn:
        xs = list(trace.x) if trace.x is not None else list(range(len(trace.y)))
        ends = _error_ends(trace) or [(None, None)] * len(trace.y)
        writer.writerows(["" if v is None else v for v in (trace.name or "", names.get(x, x), y, *(e if spans else ()))]
                         for x, y, e in zip(xs, trace.y, ends, strict=False))  # fmt: skip
    return out.getvalue()


def _error_ends(trace: Any) -> list[tuple[float | None, float | None]] | None:
    """Each point's 95% interval (lo, hi) from the trace's asymmetric error bars (``plots.error_bars``), rounded
    as the figure's values are; None for a trace without them."""
    err = getattr(trace, "error_y", None)
    if err is None or err.array is None or not hasattr(trace, "y"):
        return None
    minus = err.arrayminus if err.arrayminus is not None else err.array
    return [(None, None) if y is None or up is None or down is None else (round(y - down, 8), round(y + up, 8))
            for y, up, down in zip(trace.y, err.array, minus, strict=False)]  # fmt: skip


def metrics_csv(metrics: Mapping[str, Sequence[tuple[int, float]]]) -> str:
    """A run's logged series as ``metric,step,value`` lines (the "Metrics CSV" download): the stored values,
    except an LM depth sweep's penalty series (stored as the paper's (L_base − L) / L_base, lower = worse),
    written as every figure shows them: ``loss_penalty_pct:{mode}:{head}``, % of the base loss, higher = worse.

    >>> print(metrics_csv({"loss": [(1, 2.5)], "penalty:merge:a": [(0, -0.25)]}), end="")
    metric,step,value
    loss,1,2.5
    loss_penalty_pct:merge:a,0,25.0
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["metric", "step", "value"])
    for name, points in metrics.items():
        kind, sep, rest = name.partition(":")
        lm = kind == PENALTY_SERIES and sep
        shown = f"{LOSS_PENALTY_COLUMN}:{rest}" if lm else name
        for step, value in points:
            v = loss_penalty_pct(value) if lm else value
            writer.writerow([shown, step, "" if v is None or (isinstance(v, float) and math.isnan(v)) else v])
    return out.getvalue()


def _plain(name: str, fig: go.Figure, caption: str = "") -> RunFigure:
    return RunFigure(name, fig.layout.title.text or name, fig, figure_csv(fig), caption)


def _panel(panel: HeatPanel, **marks: Any) -> RunFigure:
    return RunFigure(panel.csv_name, panel.title, panel_figure(panel, **marks), panel.csv())


# ---------------------------------------------------------------------------------------------- per kind


def _curve(record: RunRecord, store: Store, title: str) -> list[RunFigure]:
    series = store.series(record.id)
    if not plots_runs.has_training_curve(series):  # none logged, or a 0-epoch stitch's one starting point
        return []
    return [_plain("training-curve", plots_runs.training_curves(series, title=title, most=CURVE_POINTS))]


def _stitch(record: RunRecord, store: Store) -> list[RunFigure]:
    s = record.summary
    figs = []
    if s.get("base") and s.get("accuracy") is not None:
        figs += [_plain("accuracy", plots_runs.accuracy_bars(s)), _plain("per-class", plots_runs.per_class_bars(s))]
    return figs + _curve(record, store, "Training curve")


def _similarity(record: RunRecord, store: Store) -> list[RunFigure]:
    """The calibrated map (where the run has one) then the raw maps, each group's first figure saying how to read
    it (:func:`~stitchcore.experiments.similarity.similarity_map_words`)."""
    s = record.summary
    if not s.get("values"):
        return []
    calibrated = random_null_panel(s)
    figs = [_panel(p) for p in cka_panels(s, "raw")]
    figs[0] = replace(figs[0], caption=similarity_map_words(s, "raw"))
    if calibrated is None:
        return figs
    return [replace(_panel(calibrated), caption=similarity_map_words(s, "calibrated")), *figs]


def _matrix(record: RunRecord, store: Store) -> list[RunFigure]:
    state = matrix_state(store, record.id, record.summary, spec_from_record(record), status=record.status,
                         final=record.status == "done")  # the axes the run computed: the summary's, else its cells'
    if not state.senders:
        return []
    senders, receivers, marks = state.senders, state.receivers, {"skipped": state.skipped, "pending": state.pending}
    figs = [_panel(stitching_panel(state.grid(metric), senders, receivers, metric, state.intervals(metric)), **marks)
            for metric in state.metrics]  # fmt: skip (accuracy and penalty if scored, then the fits' proxy)
    if state.across_seeds:  # adapter seeds: each cell's mean and t-interval across them
        figs += [_panel(stitching_panel(state.grid(metric, True), senders, receivers, metric,
                                        state.intervals(metric, True), seeds=state.across_seeds["n"]), **marks)
                 for metric in ("accuracy", "penalty")]  # fmt: skip
    for table in state.controls:
        figs += [_panel(p, **marks) for p in control_panels(table, senders, receivers)]
    return figs


def _sweep(record: RunRecord, store: Store) -> list[RunFigure]:
    data = record.summary if record.status == "done" else partial_positions(store, record.id)
    metrics = data.get("metrics")
    if not metrics:
        return []
    every, ref = data.get("all_positions") or data["positions"], data["reference"]
    labels = {k: parse_metric(k).label for k in metrics}
    figs = [_plain("traits", plots_traits.trait_curves(data, ref, metrics, labels=labels, all_positions=every))]
    if data.get("simplicity"):
        figs += [_plain("simplicity", plots_traits.simplicity_curves(data, ref, all_positions=every)),
                 _plain("simplicity-normalized", plots_traits.simplicity_curves(data, ref, normalized=True,
                                                                                all_positions=every))]  # fmt: skip
    if "accuracy" in metrics:
        figs.append(_plain("penalty", plots_traits.penalty_curve(data, ref, all_positions=every)))
    heat = plots_traits.per_class_heatmap(data, data["classes"], all_positions=every,
                                          colorbar_title=colorbar_title("class_acc"))
    return figs + [_plain("per-class", heat)]


def _lm(record: RunRecord, store: Store) -> list[RunFigure]:
    s = record.summary if record.status == "done" else {}
    figs = []
    if record.kind == "lmdepth" and (s.get("mode") == "cross_depth" or any(
            k.startswith("bpb:") for k in store.series(record.id))):  # across tokenizers: bits per byte
        points = s.get("points") if s else cross_depth_points(store.series(record.id))
        figs = [_plain("bpb-by-depth", plots_lm.bpb_by_depth(points, s.get("b_bits_per_byte"), labels=CONTROL_WORDS))]
        return figs + ([_plain("bpb-heatmap", plots_lm.bpb_heatmap(s["heatmap"]))] if s.get("heatmap") else [])
    if record.kind == "lmdepth":
        points = labelled_points(s.get("points") or []) if s else partial_points(store.series(record.id))
        figs.append(_plain("penalty-by-depth", plots_lm.penalty_by_depth(points)))
    elif s.get("mode") == "cross":  # across tokenizers: bits per byte beside B, A and the controls; each adapter
        curves = plots_runs.compare_curves(cross_curves(store.series(record.id)), title="Adapter training loss")
        return [_plain("bits-per-byte", plots_lm.bpb_bars(cross_rows(s))), _plain("training-loss", curves)]
    elif s:
        figs.append(_plain("loss", plots_lm.loss_bars(s)))
    loss = store.series(record.id, ["loss"])
    if loss:
        title = "Adapter training loss (stitches one after another)"
        figs.append(_plain("training-loss", plots_runs.training_curves(loss, title=title, most=CURVE_POINTS)))
    if s.get("heatmap"):
        bar = colorbar_title("loss_penalty")
        figs.append(_plain("penalty-heatmap", plots_lm.penalty_heatmap(s["heatmap"], colorbar_title=bar)))
    return figs


def _assemble(record: RunRecord, store: Store) -> list[RunFigure]:
    s = record.summary if record.status == "done" else {}
    cells = s.get("cells") or assembled_cells(store, record.id)
    if not cells:
        return []
    base = s.get("base")
    figs = [_plain("accuracy-vs-flops", plots_assemble.accuracy_vs_flops(cells, base,
                                                                        pareto_front([*cells, *(base or {}).values()])))]
    recipes = s.get("recipes") or list(dict.fromkeys(c["recipe"] for c in cells))
    figs.append(_plain("recipes", plots_assemble.recipe_comparison(cells, recipes)))
    senders = s.get("senders") or list(dict.fromkeys(c["sender"] for c in cells))
    receivers = s.get("receivers") or list(dict.fromkeys(c["receiver"] for c in cells))
    bar = colorbar_title("accuracy")
    return figs + [_plain(f"accuracy-{r.replace('/', '-')}",
                          plots_assemble.recipe_heatmap(cells, r, senders, receivers, colorbar_title=bar))
                   for r in recipes]  # fmt: skip


def _transfer(record: RunRecord, store: Store) -> list[RunFigure]:
    s = record.summary if record.status == "done" else {}
    points = transfer_points(s)
    if not points:
        return []
    return [_plain("transfer-accuracy", plots_transfer.transfer_accuracy(points, s.get("chance"))),
            _plain("transfer-ratio", plots_transfer.transfer_ratio(points))]


def _zoo(record: RunRecord, store: Store) -> list[RunFigure]:
    return _curve(record, store, "Training curve")


# Each run kind's figures (those its view in the app draws once it has ended); one entry per registered kind
# (tests/test_kinds.py checks it against list_experiments()).
FIGURES: dict[str, Callable[[RunRecord, Store], list[RunFigure]]] = {
    "assemble": _assemble,
    "lmdepth": _lm,
    "lmstitch": _lm,
    "matrix": _matrix,
    "merge": _lm,
    "similarity": _similarity,
    "stitch": _stitch,
    "sweep": _sweep,
    "transfer": _transfer,
    "zoo": _zoo,
}


def run_figures(record: RunRecord, store: Store) -> list[RunFigure]:
    """The figures of one stored run (those the app's view of its kind draws once it has ended).

    A run that ended early draws what it finished; an unknown kind draws its training curves.
    """
    build = FIGURES.get(record.kind)
    return build(record, store) if build else _curve(record, store, "Curves")


COMPARE_METRICS = {"loss": "Training loss", "val_accuracy": "Validation accuracy", "test_accuracy": "Test accuracy"}


def compare_figures(labelled: Sequence[tuple[str, RunRecord]], store: Store) -> list[RunFigure]:
    """Several runs' curves overlaid, one figure per metric that at least two of them recorded."""
    figs = []
    for metric, title in COMPARE_METRICS.items():
        curves = [(label, store.series(rec.id, [metric])) for label, rec in labelled]
        if sum(1 for _, c in curves if c.get(metric)) >= 2:
            fig = plots_runs.compare_curves(curves, metric=metric)
            figs.append(RunFigure(f"compare-{metric}", title, fig, figure_csv(fig)))
    return figs
