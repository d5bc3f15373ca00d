"""Plotly figures of the language-model experiments, in the house style of :mod:`stitchcore.plots`.

Drawing only: a running depth sweep's points come from :func:`stitchcore.experiments.lm.partial_points`.
Points and heat maps hold the stored loss penalty, (L_base − L) / L_base (lower = worse); every figure
shows it as the app's one convention, percent of the base loss with higher = worse
(:func:`~stitchcore.plots.penalty.loss_penalty_pct`), and says how that relates to the paper's number.
Where a run stored 95% intervals over its validation windows (``loss_ci``, ``loss_penalty_ci``; runs from
before them have none) they are drawn as error bars and written on hover.

>>> fig = penalty_by_depth([{"label": "merge, head A", "split": 0, "loss_penalty": -0.2, "cut": "drop"},
...                         {"label": "merge, head A", "split": 1, "loss_penalty": 0.0, "cut": "h.0"}])
>>> [(t.name, t.y) for t in fig.data]
[('merge, head A', (20.0, 0.0))]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from stitchcore.plots._style import ROLE_COLORS, add_note, error_bars, finite, house_style, interval
from stitchcore.plots.heatmap import heatmap
from stitchcore.plots.penalty import (
    LM_PAPER_NOTE,
    LM_PAPER_PENALTY,
    LOSS_PENALTY_AXIS,
    LOSS_PENALTY_COLUMN,
    grid_of,
    loss_penalty_pct,
)
from stitchcore.plots.runs import penalty_vs_depth

__all__ = ["PENALTY_AXIS", "SIGN_NOTE", "bpb_bars", "bpb_by_depth", "bpb_heatmap", "loss_bars", "penalty_by_depth", "penalty_heatmap"]

PENALTY_AXIS = LOSS_PENALTY_AXIS  # "loss penalty = (L − L_base) / L_base (% of base loss, higher = worse)"
SIGN_NOTE = ("above 0: a higher loss than the base model (the one whose head is used) = worse; "
             + LM_PAPER_NOTE)  # fmt: skip
# The same in lines short enough for a half-width figure (the legend's title, under the axis).
_LEGEND_NOTE = "<br>".join(("above 0: a higher loss than the base model", "(the one whose head is used) = worse;",
                            f"the GPT-2 report's {LM_PAPER_PENALTY} is this", "with the sign flipped, as a fraction"))


def _two_lines(label: str) -> str:
    """An axis title too long for the plot's height: its unit and direction on a second line."""
    head, _, tail = label.rpartition(" (")
    return f"{head}<br>({tail}" if head else label


def _pct_span(ci: Any) -> list[float] | None:
    """A stored loss-penalty interval as shown: % of the base loss, higher = worse (so its ends swap).

    >>> _pct_span([-0.04, -0.012]), _pct_span(None)
    ([1.2, 4.0], None)
    """
    span = interval(ci)
    return None if span is None else sorted(loss_penalty_pct(v) for v in span)


def penalty_by_depth(points: Sequence[Mapping[str, Any]], *, title: str | None = None) -> go.Figure:
    """One line per ``label`` (mode + head): loss penalty (% of the base loss, higher = worse) against the split
    position (0 = after the embeddings); ``points`` hold the stored ``loss_penalty`` and, where the run stored
    it, ``loss_penalty_ci`` (drawn as error bars)."""
    shown = [{**p, LOSS_PENALTY_COLUMN: loss_penalty_pct(p.get("loss_penalty")),
              "shown_ci": _pct_span(p.get("loss_penalty_ci"))} for p in points]  # fmt: skip
    fig = penalty_vs_depth(shown, x="split", y=LOSS_PENALTY_COLUMN, group="label", higher_is_worse=True,
                           title=title or "Loss penalty vs split depth", y_title=_two_lines(PENALTY_AXIS), unit="%",
                           csv_value=LOSS_PENALTY_COLUMN, interval="shown_ci")  # fmt: skip
    splits = sorted({int(p["split"]) for p in points if finite(p.get("split"))})
    names = {int(p["split"]): str(p.get("cut", p["split"])) for p in points if finite(p.get("split"))}
    if splits:
        text = [f"{k}<br>{names[k]}" if names[k] not in ("", str(k)) else str(k) for k in splits]
        fig.update_xaxes(tickmode="array", tickvals=splits, ticktext=text,
                         title_text="split i (A's blocks < i, B's from i) · cut")
    # Legend under the axis (four curves do not fit beside the title); the sign convention as its title.
    fig.update_layout(legend={"orientation": "h", "x": 0.0, "xanchor": "left", "y": -0.28, "yanchor": "top",
                              "title": {"text": _LEGEND_NOTE + "<br>", "side": "top", "font": {"size": 11}}},
                      margin={"b": 180}, height=510)
    return fig


def penalty_heatmap(heat: Mapping[str, Any], *, title: str | None = None,
                    colorbar_title: str | None = None) -> go.Figure:  # fmt: skip
    """Stitch loss penalty for every (A position i, B position j), B's head, in % of B's loss: higher = worse
    (red); ``heat["values"]`` hold the stored (L_base − L) / L_base; ``colorbar_title`` says what the colour means
    (``measures.meaning.colorbar_title("loss_penalty")``)."""
    return heatmap(grid_of(heat["values"], loss_penalty_pct), heat["rows"], heat["cols"],
                   title=title or "Stitch loss penalty (% of B's loss), every (i, j)",
                   row_label="A's stream after cut i", col_label="B continues after cut j", diverging=True,
                   higher_is_worse=True, text_format="+.1f", unit="%", csv_value=LOSS_PENALTY_COLUMN,
                   value_label="loss penalty", colorbar_title=colorbar_title)  # fmt: skip


_CONTROL_COLORS = {"shuffled_alignment": "#9e9e9e", "random_a": "#616161"}


def bpb_by_depth(points: Sequence[Mapping[str, Any]], b_bpb: float | None, *,
                 labels: Mapping[str, str] | None = None, title: str | None = None) -> go.Figure:
    """A cross-tokenizer depth sweep: bits per byte of the stitch at each split (error bars: its 95% interval
    over the held-out windows) and of each control beside it, with B alone as a dashed line; lower is better.
    ``points``: the summary's (or ``cross_depth_points``'s while it runs); ``labels``: each control's words."""
    fig = go.Figure()
    xs = [p["split"] for p in points]
    ys = [p.get("bits_per_byte") for p in points]
    if any(finite(y) for y in ys):
        spans = [interval(p.get("bits_per_byte_ci")) for p in points]
        fig.add_trace(go.Scatter(x=xs, y=ys, name="stitched", mode="lines+markers",
                                 line={"color": ROLE_COLORS["stitched"], "width": 3}, error_y=error_bars(ys, spans),
                                 hovertemplate="split %{x}: %{y:.4f} bits/byte<extra>stitched</extra>"))  # fmt: skip
    for tag, color in _CONTROL_COLORS.items():
        cy = [(p.get("controls") or {}).get(tag, {}).get("bits_per_byte") for p in points]
        if any(finite(y) for y in cy):
            name = (labels or {}).get(tag, tag)
            fig.add_trace(go.Scatter(x=xs, y=cy, name=name, mode="lines+markers", line={"color": color, "dash": "dot"},
                                     hovertemplate=f"split %{{x}}: %{{y:.4f}} bits/byte<extra>{name}</extra>"))
    if finite(b_bpb):
        fig.add_hline(y=b_bpb, line={"color": ROLE_COLORS["b"], "dash": "dash"}, annotation_text="B alone",
                      annotation_position="bottom right")  # fmt: skip
    if not points:
        add_note(fig, "waiting for the first split…")
    fig.update_xaxes(title_text="split i (A's blocks before the adapter; B takes over at the same depth)", dtick=1)
    fig.update_yaxes(title_text="B's next-token loss (bits / byte)")
    return house_style(fig, title or "Bits per byte by depth, beside the controls (lower is better)")


def bpb_heatmap(heat: Mapping[str, Any], *, title: str | None = None) -> go.Figure:
    """Every (A position i, B position j) stitch across tokenizers: bits per byte above B alone (higher = worse)."""
    return heatmap(heat["values"], heat["rows"], heat["cols"], title=title or "Bits per byte above B alone, every (i, j)",
                   row_label="A's stream after cut i", col_label="B continues after cut j", diverging=False,
                   higher_is_worse=True, text_format="+.2f", unit="bits/byte", csv_value="bpb_penalty",
                   value_label="bits per byte above B", intervals=heat.get("values_ci"))  # fmt: skip


def _bars(labels: list[str], values: list[float], colors: list[str], cis: list[Any], *, unit: str, over: str,
          axis: str, title: str) -> go.Figure:
    """One bar a model, each with its 95% interval (``cis``: [lo, hi] or None) as an error bar and on hover."""
    spans = [interval(ci) for ci in cis]
    words = ["" if s is None else f"<br>95% interval {s[0]:.4f} – {s[1]:.4f} (bootstrap over the {over})"
             for s in spans]  # fmt: skip
    fig = go.Figure(go.Bar(
        x=labels, y=values, marker_color=colors, text=[f"{v:.3f}" for v in values], customdata=words,
        error_y=error_bars(values, spans),
        # the value inside the bar where an error bar rises above it, else on top
        **({"textposition": "inside", "insidetextanchor": "end", "textfont": {"color": "white"}} if any(spans)
           else {"textposition": "outside"}),
        hovertemplate=f"%{{x}}: %{{y:.4f}} {unit}%{{customdata}}<extra></extra>",
    ))  # fmt: skip
    if not labels:
        add_note(fig, "no scores yet")
    fig.update_yaxes(title_text=axis, rangemode="tozero")
    return house_style(fig, title, legend=False)


def bpb_bars(rows: list[Mapping[str, Any]], *, title: str | None = None) -> go.Figure:
    """Bits per byte of a cross-tokenizer stitch, B alone, A alone and the controls (lower is better), each with
    its 95% interval over the held-out windows (``rows``: :func:`stitchcore.experiments.lm.cross.cross_rows`)."""
    colors = {"stitched": ROLE_COLORS["stitched"], "b": ROLE_COLORS["b"], "a": ROLE_COLORS["a"]}
    return _bars([r["label"] for r in rows], [r["bits_per_byte"] for r in rows],
                 [colors.get(r["role"], "#9e9e9e") for r in rows], [r.get("ci") for r in rows], unit="bits per byte",
                 over="held-out windows", axis="B's next-token loss (bits / byte)",
                 title=title or "Bits per byte on held-out text (lower is better)")  # fmt: skip


def loss_bars(summary: Mapping[str, Any], *, title: str | None = None) -> go.Figure:
    """Validation loss of A, B and the joined model C (nats per token; lower is better), each with its 95%
    interval over the validation windows as an error bar where the run stored one (``base.a.loss_ci``, ...,
    ``loss_ci``)."""
    joined = "merged" if summary.get("mode") == "merge" else "stitched"
    a, b = summary["base"]["a"], summary["base"]["b"]
    rows = [("A", a["loss"], ROLE_COLORS["a"], a.get("loss_ci")),
            ("B", b["loss"], ROLE_COLORS["b"], b.get("loss_ci"))]
    if finite(summary.get("loss")):
        rows.append((joined, summary["loss"], ROLE_COLORS["stitched"], summary.get("loss_ci")))
    return _bars([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
                 unit="nats/token", over="validation windows", axis="validation loss (nats / token)",
                 title=title or "Validation loss (lower is better)")  # fmt: skip

