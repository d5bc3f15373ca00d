"""A preset's figures: several sweeps along one cut axis, the claim's lines solid, its references dashed.

A preset panel (``experiments.trait_presets.PenaltyPanel``) draws either the stitching penalty of each sweep
(:func:`~stitchcore.plots.traits.penalty_lines`) or one trait metric's rate (:func:`metric_lines`: the
Oxford presets, where a trait such as "3 predicted as 8" is read against a random-init A and a plain A
stitched the same way).  :func:`preset_figure` picks the one a panel's lines ask for.

>>> lines = [{"title": "A with the trait", "positions": ["fc1", "fc2"], "metric": "confusion:3->8",
...           "values": [0.5, 0.9], "values_ci": [[0.4, 0.6], None]},
...          {"title": "random-init A", "positions": ["fc1", "fc2"], "metric": "confusion:3->8",
...           "values": [0.1], "reference": True}]
>>> [(t.name, t.y, t.line.dash) for t in preset_figure(lines, label="3 predicted as 8").data]
[('A with the trait', (0.5, 0.9), 'solid'), ('random-init A', (0.1,), 'dash')]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from stitchcore.plots._style import (
    RUN_COLORS,
    WAITING,
    add_note,
    clean,
    error_bars,
    house_style,
    interval,
    legend_below,
    legend_fits_on_top,
)
from stitchcore.plots.traits import penalty_lines

__all__ = ["metric_lines", "preset_figure"]


def metric_lines(lines: Sequence[Mapping[str, Any]], *, label: str | None = None,
                 title: str | None = None) -> go.Figure:  # fmt: skip
    """One trait metric (a rate, 0 .. 1) of several sweeps along one cut axis.

    ``lines``: dicts with ``title``, ``positions`` (the cuts the sweep visits), ``values`` (the rate at each
    finished position), optionally ``values_ci`` (each one's 95% interval [lo, hi] or None: error bars),
    ``metric`` (its key: the y axis title unless ``label`` names it) and ``reference`` (drawn dashed); the x
    axis is the longest ``positions``.  A line with no value yet is listed in the legend as waiting.
    """
    positions = list(max((ln.get("positions") or [] for ln in lines), key=len, default=[]))
    name = label or next((str(ln["metric"]) for ln in lines if ln.get("metric")), "rate")
    fig = go.Figure()
    for i, ln in enumerate(lines):
        values = clean(ln.get("values") or [])
        spans = [interval(ci) for ci in list(ln.get("values_ci") or [])[: len(values)]]
        spans += [None] * (len(values) - len(spans))
        color = RUN_COLORS[i % len(RUN_COLORS)]
        ref = bool(ln.get("reference"))
        words = [p if s is None else f"{p} [{s[0]:.3f}, {s[1]:.3f}]" for p, s in zip(positions, spans)]
        fig.add_trace(go.Scatter(
            x=list(range(len(values))), y=values, mode="lines+markers",
            error_y=error_bars(values, spans, color=color, width=4),
            name=str(ln["title"]) + ("" if values else " (waiting)"),
            line={"color": color, "width": 2 if ref else 2.5, "dash": "dash" if ref else "solid"},
            marker={"size": 6 if ref else 8, "color": color}, customdata=words,
            hovertemplate=f"{ln['title']}<br>cut %{{customdata}}: {name} %{{y:.3f}}<extra></extra>",
        ))  # fmt: skip
    fig.update_xaxes(title_text="cut position (A up to here, B after)", tickmode="array",
                     tickvals=list(range(len(positions))), ticktext=positions,
                     range=[-0.3, max(len(positions) - 0.7, 0.7)])  # fmt: skip
    fig.update_yaxes(title_text=f"{name} (rate)", range=[-0.03, 1.05])
    fig.update_layout(meta={"csv_value": next((str(ln["metric"]) for ln in lines if ln.get("metric")), "rate")})
    if not any(ln.get("values") for ln in lines):
        add_note(fig, WAITING if positions else "no positions yet")
    fig = house_style(fig, title)
    labels = [t.name for t in fig.data]
    if not legend_fits_on_top(labels, title):  # many sweeps' titles: under the plot, never over the title
        legend_below(fig, labels)
    return fig


def preset_figure(lines: Sequence[Mapping[str, Any]], *, title: str | None = None,
                  label: str | None = None) -> go.Figure:  # fmt: skip
    """A preset panel's figure: :func:`metric_lines` when its lines carry a trait ``metric``, else the stitching
    penalty (:func:`~stitchcore.plots.traits.penalty_lines`).  ``label``: the metric's name in words."""
    if any(ln.get("metric") for ln in lines):
        return metric_lines(lines, label=label, title=title)
    return penalty_lines(lines, title=title)
