"""Plotly figure builders shared by the app pages, the CLI export and the HTML reports.

Heat maps live in :mod:`stitchcore.plots.heatmap`; the shared look in :mod:`stitchcore.plots._style`.
Every builder is a pure function: plain data as the results store holds it (dicts, lists,
``(step, value)`` tuples) in, a :class:`plotly.graph_objects.Figure` out.  The look is one
house style: template ``plotly_white``, short titles, every axis titled, hover text with
exact values, and three fixed colours for the three models of a stitch::

    ROLE_COLORS == {"a": blue, "b": orange, "stitched": green}   # Okabe-Ito, colour-blind safe

>>> fig = training_curves({"loss": [(5, 2.1), (10, 1.7)], "test_accuracy": [(10, 0.6)]})
>>> [t.name for t in fig.data]
['loss', 'test accuracy']
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from stitchcore.plots._style import (  # HEIGHT, TEMPLATE: read as plots.HEIGHT / plots.TEMPLATE
    ACCURACY_COLOR,
    HEIGHT,  # noqa: F401
    LAYOUT_COLORS,
    LOSS_COLOR,
    NARROW,
    ROLE_COLORS,
    ROLE_NAMES,
    RUN_COLORS,
    TEMPLATE,  # noqa: F401
    WAITING,
    add_note,
    clean,
    error_bars,
    finite,
    house_style,
    legend_below,
    legend_fits_on_top,
    text_px,
)
from stitchcore.plots._style import interval as span_of
from stitchcore.plots.penalty import PENALTY_AXIS, PENALTY_COLUMN, PTS, format_pts, mark_worse_side, penalty_pts

__all__ = [
    "ACCURACY_COLOR", "LAYOUT_COLORS", "LOSS_COLOR", "ROLE_COLORS", "RUN_COLORS", "accuracy_bars",
    "compare_curves", "cut_diagram", "has_training_curve", "penalty_vs_depth", "per_class_bars", "training_curves",
]  # fmt: skip

logger = logging.getLogger(__name__)

Series = Mapping[str, Sequence[tuple[int, float]]]  # Store.series: {"loss": [(step, value), ...], ...}

_LAYOUT_HINT = {"map": "C×H×W", "map_nhwc": "H×W×C", "tokens": "N×D", "vector": "D"}
_OTHER_LAYOUT_COLOR = "#BBBBBB"
_MARK_COLOR = "#222222"
_SMALL = "font-size:11px;color:#666"  # secondary tick-label text
CUT_LABEL_LIMIT = 24  # cut_diagram: above this many cuts, names and shapes show on hover only


# -- helpers ----------------------------------------------------------------------------------


def _label(key: str) -> str:
    """Axis / legend label for a metric key: ``test_accuracy`` -> ``test accuracy``."""
    return key.replace("_", " ")


def _is_accuracy(key: str) -> bool:
    return "acc" in key.lower()


def _wants_log(values: Sequence[float | None]) -> bool:
    """True when all finite values are positive and span more than 10x."""
    vals = [v for v in values if v is not None]
    return bool(vals) and min(vals) > 0 and max(vals) / min(vals) > 10


def _log_axis(values: Sequence[float | None]) -> dict[str, Any]:
    """Log axis with ticks 1, 2, 5 x 10^k written in full (plotly's minor labels "2", "5" are ambiguous)."""
    vals = [v for v in values if v is not None]
    lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
    steps = (1, 2, 5) if hi - lo <= 2 else (1,)  # over many decades, powers of ten only
    ticks = [m * 10.0**k for k in range(lo, hi + 1) for m in steps]
    ticks = [t for t in ticks if min(vals) / 1.5 <= t <= max(vals) * 1.5]
    text = [f"{t:g}" if t >= 1e-3 else f"{t:.0e}".replace("e-0", "e-") for t in ticks]
    return {"type": "log", "tickmode": "array", "tickvals": ticks, "ticktext": text}


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def _shape(shape: Sequence[int]) -> str:
    return "×".join(str(int(s)) for s in shape) if shape else "scalar"


# -- curves ------------------------------------------------------------------------------------


def thin(points: Sequence[tuple[int, float]], most: int | None) -> list[tuple[int, float]]:
    """At most ``most`` of ``points``, evenly strided, always with the last one (None: all of them).

    >>> thin([(i, float(i)) for i in range(10)], 4)
    [(0, 0.0), (4, 4.0), (8, 8.0), (9, 9.0)]
    """
    points = list(points)
    if most is None or len(points) <= most:
        return points
    stride = -(-len(points) // max(1, most - 1))  # ceil: the strided points plus the last stay within most
    kept = points[::stride]
    return kept if kept[-1] == points[-1] else [*kept, points[-1]]


def has_training_curve(series: Series) -> bool:
    """Whether :func:`training_curves` of a run's ``series`` has a curve to draw: a training loss, or a watched
    accuracy at two steps or more.  A stitch of 0 epochs (its closed-form start kept, never trained) logs only
    that start's validation accuracy at step 0: a finished one draws no chart (a running one shows "waiting").

    >>> has_training_curve({"val_accuracy": [(0, 0.94)]}), has_training_curve({"loss": [(1, 2.3)]})
    (False, True)
    """
    return bool(series.get("loss")) or any(len(series.get(k) or ()) > 1 for k in ("val_accuracy", "test_accuracy"))


def training_curves(series: Series, *, title: str | None = None, most: int | None = None) -> go.Figure:
    """One run's training loss (left axis) and its watched accuracy (right axis, 0..1) against the step.

    ``series`` is ``Store.series(run_id)``: ``{"loss": [(step, value), ...], "val_accuracy": [...]}``: the
    accuracy on the validation split held out of train (``test_accuracy`` in runs stored before it, or zoo
    trainings); other names are ignored; either may be missing or empty (a run that has not logged yet
    shows "waiting for the first steps…").  The loss axis turns logarithmic when the loss
    spans more than 10x; NaN values leave gaps.  ``most``: draw at most that many points per
    curve (:func:`thin`; a live view redrawn every second stays light for server and browser).
    """
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    loss = thin(series.get("loss") or [], most)
    watched = "val_accuracy" if series.get("val_accuracy") else "test_accuracy"
    acc = thin(series.get(watched) or [], most)
    acc_name = _label(watched).replace("val ", "validation ")
    if loss:
        steps, ys = [s for s, _ in loss], clean([v for _, v in loss])
        fig.add_trace(
            go.Scatter(
                x=steps, y=ys, name="loss", mode="lines" if len(loss) > 1 else "markers",
                line={"color": LOSS_COLOR, "width": 2}, marker={"color": LOSS_COLOR, "size": 7},
                hovertemplate="step %{x}<br>loss %{y:.6g}<extra></extra>",
            ),
            secondary_y=False,
        )  # fmt: skip
        if _wants_log(ys):
            fig.update_yaxes(**_log_axis(ys), secondary_y=False)
    if acc:
        fig.add_trace(
            go.Scatter(
                x=[s for s, _ in acc], y=clean([v for _, v in acc]), name=acc_name,
                mode="lines+markers", line={"color": ACCURACY_COLOR, "width": 1.5, "dash": "dot"},
                marker={"color": ACCURACY_COLOR, "size": 8},
                hovertemplate=f"step %{{x}}<br>{acc_name} %{{y:.4f}}<extra></extra>",
            ),
            secondary_y=True,
        )  # fmt: skip
    if not loss and not acc:
        add_note(fig, WAITING)
    fig.update_xaxes(title_text="optimizer step", rangemode="tozero")
    fig.update_yaxes(title_text="loss", title_font={"color": LOSS_COLOR}, showticklabels=bool(loss),
                     secondary_y=False)  # fmt: skip
    fig.update_yaxes(
        title_text=acc_name, title_font={"color": ACCURACY_COLOR}, range=[0, 1.02], tickformat=".0%",
        tickmode="array", tickvals=[0, 0.2, 0.4, 0.6, 0.8, 1.0], showgrid=False, secondary_y=True,
    )  # fmt: skip
    return house_style(fig, title, legend=bool(loss) and bool(acc))


def compare_curves(
    runs: Sequence[tuple[str, Series]], metric: str = "loss", *, title: str | None = None
) -> go.Figure:
    """Several runs' ``metric`` on one plot against the step; the legend is the run label (under the plot
    when the labels do not fit in one row beside the title).

    Colours follow the position in ``runs`` (``RUN_COLORS``), so a run keeps its colour when
    the metric changes; a run without the metric is left out.  Accuracy-like metrics get a
    0..1 axis and markers; others turn logarithmic when they span more than 10x.
    """
    fig = go.Figure()
    accuracy = _is_accuracy(metric)
    every: list[float | None] = []
    for i, (label, series) in enumerate(runs):
        points = list(series.get(metric) or [])
        if not points:
            continue
        ys = clean([v for _, v in points])
        every += ys
        color = RUN_COLORS[i % len(RUN_COLORS)]
        fig.add_trace(
            go.Scatter(
                x=[s for s, _ in points], y=ys, name=label,
                mode="lines+markers" if accuracy or len(points) == 1 else "lines",
                line={"color": color, "width": 2}, marker={"color": color, "size": 7},
                hovertemplate=f"{label}<br>step %{{x}}<br>{_label(metric)} %{{y:.6g}}<extra></extra>",
            )
        )  # fmt: skip
    if not fig.data:
        add_note(fig, f"no {_label(metric)} logged yet")
    fig.update_xaxes(title_text="optimizer step", rangemode="tozero")
    fig.update_yaxes(title_text=_label(metric))
    if accuracy:
        fig.update_yaxes(range=[0, 1.02], tickformat=".0%")
    elif _wants_log(every):
        fig.update_yaxes(**_log_axis(every))
    title = title or _label(metric).capitalize()
    fig = house_style(fig, title)
    labels = [t.name for t in fig.data]
    if not legend_fits_on_top(labels, title):  # runs' labels are long: under the plot, not over the title
        legend_below(fig, labels)
    return fig


# -- stitch results ----------------------------------------------------------------------------


def _cut_text(cut: Mapping[str, Any] | None) -> str:
    return f"{cut.get('name', '?')} ({_shape(cut.get('shape', ()))})" if cut else "?"


def accuracy_bars(summary: Mapping[str, Any], *, title: str | None = None) -> go.Figure:
    """A, B and the stitched model's test accuracy, with the stitching penalty (B − stitched) marked.

    ``summary`` is a stitch run's summary (``accuracy``, ``base.a``, ``base.b``, ``penalty``,
    ``cut_a``, ``cut_b``; optional ``start_accuracy`` = the stitched model before training,
    drawn as a diamond; optional ``accuracy_ci`` / ``base_ci``: 95% intervals, drawn as error bars).  The penalty is printed in percentage points, higher = worse, as on every page.
    """
    base = summary.get("base") or {}
    cut_a, cut_b = summary.get("cut_a"), summary.get("cut_b")
    cut_names = f"{(cut_a or {}).get('name', '?')} → {(cut_b or {}).get('name', '?')}"
    bars = [
        ("a", base.get("a"), "A", f"A on its own<br>(sender cut {_cut_text(cut_a)})"),
        ("b", base.get("b"), "B", f"B on its own<br>(receiver cut {_cut_text(cut_b)})"),
        ("stitched", summary.get("accuracy"), f"stitched<br><span style='{_SMALL}'>{cut_names}</span>",
         f"A[..{_cut_text(cut_a)}] → adapter → B[{_cut_text(cut_b)}..]"),
    ]  # fmt: skip
    fig = go.Figure()
    intervals = {**(summary.get("base_ci") or {}), "stitched": summary.get("accuracy_ci")}  # 95% [lo, hi] or None
    for x, (role, acc, _, what) in enumerate(bars):
        if not finite(acc):
            continue
        span = span_of(intervals.get(role))
        error = error_bars([acc], [span])
        span_words = f"<br>95% interval {span[0]:.4f} – {span[1]:.4f} (exact binomial, over the test images)" if span else ""
        fig.add_trace(
            go.Bar(
                x=[x], y=[acc], name=ROLE_NAMES[role], marker_color=ROLE_COLORS[role], width=0.6,
                text=[_pct(acc)], textposition="inside", insidetextanchor="end",
                textfont={"color": "white", "size": 13}, error_y=error,
                hovertemplate=f"<b>{ROLE_NAMES[role]}</b>: accuracy %{{y:.4f}}{span_words}<br>{what}<extra></extra>",
            )
        )  # fmt: skip
    start = summary.get("start_accuracy")
    if finite(start):
        # On the bar's left edge, away from the value label at its top; the words go under the axis.
        fig.add_trace(
            go.Scatter(
                x=[1.7], y=[start], name="stitched before training", mode="markers",
                marker={"symbol": "diamond", "size": 11, "color": "white", "line": {"color": _MARK_COLOR,
                                                                                      "width": 2}},
                hovertemplate="stitched before training (adapter init): accuracy %{y:.4f}<extra></extra>",
            )
        )  # fmt: skip
        bars[2] = (*bars[2][:2], f"{bars[2][2]}<br><span style='{_SMALL}'>◇ before training {_pct(start)}</span>",
                   bars[2][3])
    acc_b, acc_s = base.get("b"), summary.get("accuracy")
    penalty = summary.get("penalty")
    if not finite(penalty) and finite(acc_b) and finite(acc_s):
        penalty = acc_b - acc_s
    if finite(penalty) and finite(acc_b) and finite(acc_s):
        # Dashed level of B carried over to the stitched bar, a bracket down to the stitched top.
        guide = {"color": "#555", "width": 1.5}
        fig.add_shape(type="line", x0=1.3, x1=2.42, y0=acc_b, y1=acc_b, line=guide | {"dash": "dash"})
        fig.add_shape(type="line", x0=2.38, x1=2.38, y0=acc_s, y1=acc_b, line=guide | {"width": 2})
        fig.add_annotation(
            x=2.42, y=(acc_b + acc_s) / 2, xanchor="left", showarrow=False, align="left",
            text=f"penalty<br>B − stitched<br><b>{format_pts(penalty_pts(penalty))}</b>",
            hovertext=f"penalty = B − stitched = {100 * acc_b:.2f}% − {100 * acc_s:.2f}% = "
                      f"{format_pts(penalty_pts(penalty))} (higher = worse)",
        )  # fmt: skip
    fig.update_xaxes(title_text="model", tickvals=[0, 1, 2], ticktext=[b[2] for b in bars], range=[-0.5, 3.1])
    fig.update_yaxes(title_text="test accuracy", range=[0, 1.05], tickformat=".0%")
    return house_style(fig, title or "Stitched vs base accuracy", legend=False)


def per_class_bars(summary: Mapping[str, Any], *, title: str | None = None) -> go.Figure:
    """Per-class test accuracy of A, B and the stitched model as grouped bars, classes on x.

    Reads ``per_class``, ``per_class_base.{a,b}`` and ``classes`` of a stitch summary;
    ``None`` (a class absent from the test split) leaves its bar out.  ``per_class_ci`` and
    ``per_class_base_ci.{a,b}`` (95% intervals, each class on its own few test images) are error bars.
    """
    ci_base = summary.get("per_class_base_ci") or {}
    cis = {"a": ci_base.get("a") or [], "b": ci_base.get("b") or [], "stitched": summary.get("per_class_ci") or []}
    stitched = list(summary.get("per_class") or [])
    per_base = summary.get("per_class_base") or {}
    rows = {"a": list(per_base.get("a") or []), "b": list(per_base.get("b") or []), "stitched": stitched}
    n = max(len(v) for v in rows.values())
    classes = [str(c) for c in (summary.get("classes") or [])][:n]
    classes += [str(i) for i in range(len(classes), n)]
    b_vals = rows["b"] + [None] * (n - len(rows["b"]))
    fig = go.Figure()
    for role, vals in rows.items():
        keep = [i for i, v in enumerate(vals) if finite(v)]
        if not keep:
            continue
        vs_b = [role == "stitched" and finite(b_vals[i]) for i in keep]
        delta = [f"<br>{100 * (vals[i] - b_vals[i]):+.1f} pts vs B" if v else "" for i, v in zip(keep, vs_b)]
        spans = [span_of(cis[role][i]) if i < len(cis[role]) else None for i in keep]
        error = error_bars([vals[i] for i in keep], spans, thickness=1, width=2)  # None: a run before intervals
        delta = [f"{d}<br>95% interval {sp[0]:.3f} – {sp[1]:.3f}" if sp else d for d, sp in zip(delta, spans)]
        fig.add_trace(
            go.Bar(
                x=[classes[i] for i in keep], y=[vals[i] for i in keep], name=ROLE_NAMES[role],
                marker_color=ROLE_COLORS[role], customdata=delta, error_y=error,
                hovertemplate=f"class %{{x}}<br>{ROLE_NAMES[role]}: %{{y:.4f}}%{{customdata}}<extra></extra>",
            )
        )  # fmt: skip
    if not fig.data:
        add_note(fig, "no per-class accuracy")
    fig.update_layout(barmode="group", bargap=0.25, bargroupgap=0.05)
    fig.update_xaxes(title_text="class", type="category", categoryorder="array", categoryarray=classes)
    fig.update_yaxes(title_text="test accuracy", range=[0, 1.05], tickformat=".0%")
    return house_style(fig, title or "Per-class accuracy")


# -- networks and matrices ---------------------------------------------------------------------


def cut_diagram(
    cuts: Sequence[Mapping[str, Any]],
    *,
    marked: Sequence[str] | Mapping[str, str] = (),
    title: str | None = None,
) -> go.Figure:
    """A compact picture of a network: one box per cut in execution order.

    Box height is the activation size on a log axis, colour the layout (``LAYOUT_COLORS``).
    Up to ``CUT_LABEL_LIMIT`` cuts, names label the x axis and shapes sit on the boxes;
    above it (a Swin has ~60 cuts) both show on hover only.  ``marked`` cut names get a
    dark outline and a caption: a mapping gives the caption (``{"block1": "sender"}``),
    a list uses the name.  Unknown marked names are logged and ignored.

    Laid out for the narrowest width it is drawn at (``NARROW``): names that would run into each other
    are slanted, with a bottom margin for the longest; shapes too wide for their box run up inside it,
    at a readable size or not at all (hover has them).
    """
    cuts = list(cuts)
    captions = dict(marked) if isinstance(marked, Mapping) else {m: m for m in marked}
    names = [str(c.get("name", i)) for i, c in enumerate(cuts)]
    unknown = sorted(set(captions) - set(names))
    if unknown:
        logger.warning("cut_diagram: marked cuts not in the list: %s", ", ".join(unknown))
    fig = go.Figure()
    labelled = len(cuts) <= CUT_LABEL_LIMIT
    sizes = [math.prod(int(s) for s in c.get("shape") or ()) for c in cuts]  # values per example
    layouts = [str(c.get("layout", "?")) for c in cuts]
    shapes = [_shape(c.get("shape") or ()) for c in cuts]
    pitch = (NARROW - 100) / max(len(cuts), 1)  # px per cut at the narrowest width (less the y axis)
    slanted = labelled and max((text_px(n) for n in names), default=0) > 0.9 * pitch
    upright = labelled and max((text_px(t, 11) for t in shapes), default=0) > 0.72 * pitch  # shapes inside
    order = list(LAYOUT_COLORS) + sorted(set(layouts) - set(LAYOUT_COLORS))
    for layout in order:
        idx = [i for i, lay in enumerate(layouts) if lay == layout]
        if not idx:
            continue
        hint = f" ({_LAYOUT_HINT[layout]})" if layout in _LAYOUT_HINT else ""
        fig.add_trace(
            go.Bar(
                x=idx, y=[sizes[i] for i in idx], name=layout + hint, width=0.72,
                marker={"color": LAYOUT_COLORS.get(layout, _OTHER_LAYOUT_COLOR), "line": {"width": 0}},
                text=[shapes[i] for i in idx] if labelled else None, textfont={"size": 11},
                textposition="inside" if upright else "outside", textangle=-90 if upright else 0,
                insidetextanchor="end", cliponaxis=False,
                customdata=[
                    [names[i], _shape(cuts[i].get("shape") or ()), float(cuts[i].get("depth", math.nan))]
                    for i in idx
                ],
                hovertemplate=(
                    "<b>%{customdata[0]}</b> (cut %{x})<br>shape %{customdata[1]} · " + layout
                    + "<br>%{y:,} values · depth %{customdata[2]:.3f}<extra></extra>"
                ),
            )
        )  # fmt: skip
    hit = [i for i, name in enumerate(names) if name in captions]
    if hit:  # outlines on top of the boxes, kept out of the legend so its swatches stay plain
        fig.add_trace(
            go.Bar(
                x=hit, y=[sizes[i] for i in hit], width=0.72, showlegend=False, hoverinfo="skip",
                marker={"color": "rgba(0,0,0,0)", "line": {"color": _MARK_COLOR, "width": 3}},
            )
        )  # fmt: skip
    for i in hit:
        # Thin bars near an edge: the caption grows inwards so it is not clipped.
        edge = i / len(cuts)
        side = "center" if labelled else "left" if edge < 0.15 else "right" if edge > 0.85 else "center"
        cap = f"<b>{captions[names[i]]}</b>"
        text = {"left": f"▼ {cap}", "right": f"{cap} ▼"}.get(side, f"{cap}<br>▼")
        fig.add_annotation(
            x=i, y=1, yref="paper", yanchor="bottom", xanchor=side, text=text, showarrow=False,
            font={"color": _MARK_COLOR, "size": 12},
        )  # fmt: skip
    if not cuts:
        add_note(fig, "no cuts")
    top = math.log10(max(sizes, default=10)) * 1.2 + 0.3
    # shapes inside the boxes: one size for all of them, never below 9 px (hidden instead: hover has them)
    fig.update_layout(barmode="overlay", bargap=0.2, uniformtext={"minsize": 9, "mode": "hide"})
    if labelled:
        fig.update_xaxes(title_text="cut (execution order)", tickvals=list(range(len(cuts))), ticktext=names,
                         tickangle=-45 if slanted else 0)  # fixed angle: plotly drops auto-angled labels
    else:
        fig.update_xaxes(title_text="cut index (execution order; names on hover)")
    fig.update_xaxes(range=[-0.6, max(len(cuts), 1) - 0.4], showgrid=False, zeroline=False, automargin=True)
    fig.update_yaxes(title_text="activation size<br>(values per example)", type="log", range=[0, top],
                     dtick=1, tickformat="~s")  # fmt: skip
    fig = house_style(fig, title, height=340)
    # slanted names: the longest's drop (sin 45°) and the axis title below it
    bottom = min(180, 46 + round(0.71 * max(text_px(n) for n in names))) if slanted else 56
    labels = [t.name for t in fig.data if t.showlegend is not False]
    if hit:  # legend one row above the captions of the marked cuts, so a marked last cut never hides under it
        fig.update_layout(margin={"t": 110 if title else 86, "b": bottom}, legend={"y": 1.16},
                          height=380 + bottom - 56)
    elif legend_fits_on_top(labels, title):
        fig.update_layout(margin={"b": bottom}, height=340 + bottom - 56)
    else:
        fig.update_layout(margin={"b": bottom}, height=340 + bottom - 56)
        legend_below(fig, labels)
    return fig


def penalty_vs_depth(
    points: Sequence[Mapping[str, Any]],
    x: str = "depth",
    y: str = "penalty",
    group: str = "label",
    *,
    title: str | None = None,
    higher_is_worse: bool | None = None,
    y_title: str | None = None,
    unit: str | None = None,
    csv_value: str | None = None,
    interval: str | None = None,
) -> go.Figure:
    """Lines of ``point[y]`` against ``point[x]``, one per ``point[group]`` (sweeps along depth).

    Points lacking a finite ``x`` or ``y`` are skipped; groups keep their first-seen order and
    ``RUN_COLORS``.  A ``cut`` or ``name`` field, when present, shows on hover.  A zero line
    is drawn when ``y`` is a penalty.  ``y="penalty"`` (a stored fraction B − stitched) is drawn in
    points, higher = worse (:mod:`stitchcore.plots.penalty`); otherwise ``higher_is_worse`` names the
    worse side beside the axis, ``y_title`` / ``unit`` title the axis and suffix the hovered value, and
    ``csv_value`` names the y column of the figure's CSV.  ``interval`` names the field holding a point's 95%
    interval ``[lo, hi]`` in ``y``'s units (converted with it): drawn as error bars and written on hover; points
    without one (runs stored before intervals) get none.
    """
    if y == "penalty":
        points = [{**p, y: penalty_pts(p.get(y)),
                   **({interval: [penalty_pts(v) for v in p[interval]]} if interval and span_of(p.get(interval))
                      else {})} for p in points]  # fmt: skip
        higher_is_worse = True if higher_is_worse is None else higher_is_worse
        y_title, unit, csv_value = y_title or PENALTY_AXIS, unit or PTS, csv_value or PENALTY_COLUMN
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for p in points:
        if finite(p.get(x)) and finite(p.get(y)):
            groups.setdefault("" if p.get(group) is None else str(p[group]), []).append(p)
    value = f"%{{y:+.1f}} {unit}" if unit else "%{y:.6g}"
    fig = go.Figure()
    for i, (name, pts) in enumerate(groups.items()):
        pts = sorted(pts, key=lambda p: p[x])
        color = RUN_COLORS[i % len(RUN_COLORS)]
        spans = [span_of(p.get(interval)) if interval else None for p in pts]
        error = error_bars([p[y] for p in pts], spans, color=color, thickness=1.2, width=4)  # 95% intervals
        words = None
        if error:  # and a hover line each
            ends = (lambda v: f"{v:+.1f}") if unit else (lambda v: f"{v:.4g}")
            words = ["" if s is None else f"<br>95% interval {ends(s[0])} – {ends(s[1])}{f' {unit}' if unit else ''}"
                     for s in spans]  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=[p[x] for p in pts], y=[p[y] for p in pts], name=name or "(no label)", mode="lines+markers",
                line={"color": color, "width": 2}, marker={"color": color, "size": 8},
                customdata=[str(p.get("cut", p.get("name", ""))) for p in pts], error_y=error, text=words,
                hovertemplate=f"{name}<br>%{{customdata}}<br>{_label(x)} %{{x:.4g}}<br>"
                f"{_label(y)} {value}{'%{text}' if words else ''}<extra></extra>",
            )
        )  # fmt: skip
    if not fig.data:
        add_note(fig, "no points yet")
    if "penalty" in y:
        fig.add_hline(y=0, line={"color": "#999", "width": 1})
    fig.update_xaxes(title_text=_label(x))
    fig.update_yaxes(title_text=y_title or _label(y))
    if csv_value:
        fig.update_layout(meta={"csv_value": csv_value})
    fig = house_style(fig, title or f"{_label(y)} vs {_label(x)}".capitalize())
    return fig if higher_is_worse is None else mark_worse_side(fig, higher_is_worse)
