"""Figures of the ``transfer`` kind: a probe carried from A into B through a fitted stitch, along depth.

>>> pts = [{"cut_a": "block1", "cut_b": "block1", "depth_a": 0.2, "transferred": 0.5, "native": 0.8,
...         "random_adapter": 0.1, "ratio": 0.625, "ratio_ci": [0.55, 0.7]}]
>>> [t.name for t in transfer_accuracy(pts, 0.1).data]
['transferred', 'native (fitted on B)', 'random adapter']
>>> transfer_ratio(pts).data[0].y
(0.625,)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from stitchcore.plots._style import ROLE_COLORS, add_note, error_bars, house_style, interval

__all__ = ["transfer_accuracy", "transfer_ratio"]

_SIDES = (("transferred", "transferred", ROLE_COLORS["stitched"], "solid"),
          ("native", "native (fitted on B)", ROLE_COLORS["b"], "dash"),
          ("random_adapter", "random adapter", "#9e9e9e", "dot"))  # fmt: skip


def _where(points: Sequence[Mapping[str, Any]]) -> list[str]:
    return [f"{p['cut_a']}→{p['cut_b']}" for p in points]


def transfer_accuracy(points: Sequence[Mapping[str, Any]], chance: float | None, *, title: str | None = None) -> go.Figure:
    """The probe's accuracy on B's test images at each cut pair (A's depth order): carried from A, fitted on B, and
    carried through a random-init adapter, each with its 95% interval; chance as a line."""
    fig, xs = go.Figure(), _where(points)
    for key, name, color, dash in _SIDES:
        ys = [p.get(key) for p in points]
        spans = [interval(p.get(f"{key}_ci")) for p in points]
        fig.add_trace(go.Scatter(x=xs, y=ys, name=name, mode="lines+markers", line={"color": color, "dash": dash},
                                 error_y=error_bars(ys, spans),
                                 hovertemplate=f"%{{x}}: %{{y:.1%}}<extra>{name}</extra>"))  # fmt: skip
    if chance is not None:
        fig.add_hline(y=chance, line={"color": "#616161", "dash": "dot"}, annotation_text="chance",
                      annotation_position="bottom right")  # fmt: skip
    if not points:
        add_note(fig, "waiting for the first cut pair…")
    fig.update_xaxes(title_text="A's cut → B's cut (shallow to deep)")
    fig.update_yaxes(title_text="probe accuracy on B's test images", range=[0, 1.02], tickformat=".0%")
    return house_style(fig, title or "A's probe read on B")


def transfer_ratio(points: Sequence[Mapping[str, Any]], *, title: str | None = None) -> go.Figure:
    """Transferred / native accuracy at each cut pair (1 = the carried probe reads B as well as B's own), with its
    paired 95% interval."""
    xs, ys = _where(points), [p.get("ratio") for p in points]
    spans = [interval(p.get("ratio_ci")) for p in points]
    fig = go.Figure(go.Scatter(x=xs, y=ys, name="transferred / native", mode="lines+markers",
                               line={"color": ROLE_COLORS["stitched"], "width": 3}, error_y=error_bars(ys, spans),
                               hovertemplate="%{x}: %{y:.3f}<extra>transferred / native</extra>"))  # fmt: skip
    fig.add_hline(y=1.0, line={"color": ROLE_COLORS["b"], "dash": "dash"}, annotation_text="as good as B's own",
                  annotation_position="bottom right")  # fmt: skip
    if not points:
        add_note(fig, "waiting for the first cut pair…")
    fig.update_xaxes(title_text="A's cut → B's cut (shallow to deep)")
    fig.update_yaxes(title_text="transferred / native accuracy", rangemode="tozero")
    return house_style(fig, title or "Transferred / native accuracy along depth", legend=False)
