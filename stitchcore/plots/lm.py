"""Plotly figures of the language-model experiments, in the house style of :mod:`stitchcore.plots`.

Drawing only: a running depth sweep's points come from :func:`stitchcore.experiments.lm.partial_points`.

>>> fig = penalty_by_depth([{"label": "merge, head A", "split": 0, "loss_penalty": -0.2, "cut": "drop"},
...                         {"label": "merge, head A", "split": 1, "loss_penalty": 0.0, "cut": "h.0"}])
>>> [t.name for t in fig.data]
['merge, head A']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from stitchcore.plots._style import ROLE_COLORS, add_note, finite, house_style
from stitchcore.plots.heatmap import heatmap
from stitchcore.plots.penalty import LM_PENALTY, penalty_label
from stitchcore.plots.runs import penalty_vs_depth

__all__ = ["HIGHER_IS_WORSE", "PENALTY_AXIS", "loss_bars", "penalty_by_depth", "penalty_heatmap"]

HIGHER_IS_WORSE = False  # the GPT-2 report's loss penalty: below 0 = higher loss than the base = worse
PENALTY_AXIS = penalty_label("loss penalty", LM_PENALTY, higher_is_worse=HIGHER_IS_WORSE)
_SIGN_NOTE = "below 0: higher loss than the base model (the one whose head is used) = worse"


def penalty_by_depth(points: Sequence[Mapping[str, Any]], *, title: str | None = None) -> go.Figure:
    """One line per ``label`` (mode + head): loss penalty against the split position (0 = after the embeddings)."""
    fig = penalty_vs_depth(points, x="split", y="loss_penalty", group="label", higher_is_worse=HIGHER_IS_WORSE,
                           title=title or "Loss penalty vs split depth")
    splits = sorted({int(p["split"]) for p in points if finite(p.get("split"))})
    names = {int(p["split"]): str(p.get("cut", p["split"])) for p in points if finite(p.get("split"))}
    if splits:
        text = [f"{k}<br>{names[k]}" if names[k] not in ("", str(k)) else str(k) for k in splits]
        fig.update_xaxes(tickmode="array", tickvals=splits, ticktext=text,
                         title_text="split i (A's blocks < i, B's from i) · cut")
    fig.update_yaxes(title_text=PENALTY_AXIS)
    # Legend under the axis (four curves do not fit beside the title); the sign convention as its title.
    fig.update_layout(legend={"orientation": "h", "x": 0.0, "xanchor": "left", "y": -0.28, "yanchor": "top",
                              "title": {"text": _SIGN_NOTE + "<br>", "side": "top", "font": {"size": 11}}},
                      margin={"b": 130}, height=460)
    return fig


def penalty_heatmap(heat: Mapping[str, Any], *, title: str | None = None) -> go.Figure:
    """Stitch loss penalty for every (A position i, B position j), B's head; red = worse than B (lower)."""
    return heatmap(heat["values"], heat["rows"], heat["cols"],
                   title=title or f"Stitch loss penalty {LM_PENALTY}, every (i, j)",
                   row_label="A's stream after cut i", col_label="B continues after cut j", diverging=True,
                   higher_is_worse=HIGHER_IS_WORSE, text_format=".3f", value_label="loss penalty")  # fmt: skip


def loss_bars(summary: Mapping[str, Any], *, title: str | None = None) -> go.Figure:
    """Validation loss of A, B and the joined model C (nats per token; lower is better)."""
    joined = "merged" if summary.get("mode") == "merge" else "stitched"
    rows = [("A", summary["base"]["a"]["loss"], ROLE_COLORS["a"]), ("B", summary["base"]["b"]["loss"],
                                                                      ROLE_COLORS["b"])]
    if finite(summary.get("loss")):
        rows.append((joined, summary["loss"], ROLE_COLORS["stitched"]))
    fig = go.Figure(go.Bar(
        x=[r[0] for r in rows], y=[r[1] for r in rows], marker_color=[r[2] for r in rows],
        text=[f"{r[1]:.3f}" for r in rows], textposition="outside",
        hovertemplate="%{x}: loss %{y:.4f} nats/token<extra></extra>",
    ))  # fmt: skip
    if not rows:
        add_note(fig, "no scores yet")
    fig.update_yaxes(title_text="validation loss (nats / token)", rangemode="tozero")
    return house_style(fig, title or "Validation loss (lower is better)", legend=False)

