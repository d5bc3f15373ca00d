"""The house style of every StitchLab figure: colours, sizes, layout and small value helpers.

Private to :mod:`stitchcore.plots`: the figure modules (runs, heatmap, lm, traits) share it so
that every figure looks alike.  Template ``plotly_white``, short titles, every axis titled, the
legend on top (under the plot when it would not fit beside the title: :func:`legend_below`), and
three fixed colours for the three models of a stitch (Okabe-Ito, colour-blind safe).

>>> clean([1, float("nan"), None, 2.5])
[1.0, None, None, 2.5]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

__all__ = [
    "ACCURACY_COLOR", "HEIGHT", "LAYOUT_COLORS", "LOSS_COLOR", "NARROW", "ROLE_COLORS", "ROLE_NAMES",
    "RUN_COLORS", "TEMPLATE", "WAITING", "add_note", "clean", "error_bars", "finite", "house_style", "interval",
    "legend_below", "legend_fits_on_top", "legend_rows", "text_px",
]  # fmt: skip

# The three models of a stitch keep these colours in every figure (Okabe-Ito palette).
ROLE_COLORS: dict[str, str] = {"a": "#0072B2", "b": "#E69F00", "stitched": "#009E73"}
ROLE_NAMES: dict[str, str] = {"a": "A", "b": "B", "stitched": "stitched"}
LOSS_COLOR = "#3B4A5A"  # one run's loss curve (slate: not a model colour)
ACCURACY_COLOR = "#CC79A7"  # one run's test-accuracy markers
# Several runs on one plot (compare_curves, penalty_vs_depth): Okabe-Ito without the role colours first.
RUN_COLORS: tuple[str, ...] = (
    "#D55E00", "#56B4E9", "#CC79A7", "#0072B2", "#E69F00", "#009E73", "#3B4A5A", "#F0E442", "#999999",
)  # fmt: skip
LAYOUT_COLORS = {"map": "#8DA0CB", "map_nhwc": "#5B6FA8", "tokens": "#E78AC3", "vector": "#A6D854"}
TEMPLATE = "plotly_white"
HEIGHT = 380  # default figure height in px: two fit on a laptop screen
WAITING = "waiting for the first steps…"
# The narrowest a figure is drawn, in px (a report's grid column, a page's half column): layouts that
# depend on whether labels fit are decided for this width, so they fit wherever the figure is shown.
NARROW = 460
LEGEND_ROW = 20  # px per row of a legend under the plot


def finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def clean(values: Sequence[Any]) -> list[float | None]:
    """Floats with NaN / inf / None as None (a gap in a line, null in JSON)."""
    return [float(v) if finite(v) else None for v in values]


def interval(ci: Any) -> tuple[float, float] | None:
    """A stored 95% interval ``[lo, hi]`` as (lo, hi); None where there is none (a run from before intervals).

    >>> interval([0.9, 0.95]), interval(None), interval([0.9, float("nan")])
    ((0.9, 0.95), None, None)
    """
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or not all(finite(v) for v in ci):
        return None
    return float(ci[0]), float(ci[1])


def error_bars(values: Sequence[Any], spans: Sequence[tuple[float, float] | None], color: str = "#333",
               thickness: float = 1.5, width: float = 6) -> dict[str, Any] | None:  # fmt: skip
    """Plotly ``error_y`` of asymmetric bars from each value's (lo, hi) (:func:`interval`); no bar where a value
    has none; None where none has one (the figure of a run stored before intervals is drawn as it was).

    >>> error_bars([0.9, 0.5], [(0.85, 0.93), None])["array"]
    [0.03, None]
    """
    if not any(spans):
        return None
    ends = [(None, None) if s is None or not finite(v) else (round(max(s[1] - v, 0.0), 10),
                                                              round(max(v - s[0], 0.0), 10))
            for v, s in zip(values, spans)]  # fmt: skip
    return {"type": "data", "symmetric": False, "color": color, "thickness": thickness, "width": width,
            "array": [e[0] for e in ends], "arrayminus": [e[1] for e in ends]}


def house_style(fig: go.Figure, title: str | None, height: int = HEIGHT, legend: bool = True) -> go.Figure:
    """The house layout: template, title, margins, legend on top."""
    fig.update_layout(
        template=TEMPLATE,
        title={"text": title, "x": 0.01, "xanchor": "left"} if title else None,
        height=height,
        margin={"l": 64, "r": 24, "t": 64 if title else 36, "b": 56},
        showlegend=legend,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1.0},
        hoverlabel={"align": "left"},
    )
    return fig


def text_px(text: str, size: float = 12) -> float:
    """Rough width of ``text`` in px at font ``size`` (0.55 em a character: the house sans-serif's average).

    >>> text_px("layers.2.blocks.0")
    112.2
    """
    return round(0.55 * size * len(text), 1)


def _entry_px(label: str) -> float:
    return 46 + text_px(label)  # the swatch and its gap, then the name


def legend_rows(labels: Sequence[str], width: float = NARROW) -> int:
    """Rows a horizontal legend of ``labels`` takes at ``width`` px: one while every entry fits, else plotly
    wraps it into columns as wide as its widest entry.

    >>> long = "zoo:cnn-digits-s0[block2] -> zoo:cnn-digits-s1[block2]"
    >>> legend_rows(["A", "B", "stitched"]), legend_rows([long] * 3)
    (1, 3)
    """
    if not labels:
        return 0
    if sum(_entry_px(label) for label in labels) <= width:
        return 1
    columns = max(1, int(width // max(_entry_px(label) for label in labels)))
    return math.ceil(len(labels) / columns)


def legend_fits_on_top(labels: Sequence[str], title: str | None, width: float = NARROW) -> bool:
    """Whether the house legend (one row, top right) fits beside the title without covering it."""
    title_px = text_px(title or "", 17) + 24
    return legend_rows(labels, width - title_px) <= 1 and legend_rows(labels, width) <= 1


def legend_below(fig: go.Figure, labels: Sequence[str]) -> None:
    """Move a house-styled figure's legend under the plot (below the x axis title), as many rows as its
    entries need at :data:`NARROW` px, and make the figure that much taller: long names (a run's label) never
    cover the title or squeeze the plot."""
    rows = max(1, legend_rows(labels))
    margin = fig.layout.margin
    fig.update_layout(
        height=(fig.layout.height or HEIGHT) + rows * LEGEND_ROW,
        margin={"b": (margin.b if margin.b is not None else 56) + rows * LEGEND_ROW + 6},
        legend={"orientation": "h", "yref": "container", "y": 0.0, "yanchor": "bottom", "x": 0.0,
                "xanchor": "left"},
    )  # fmt: skip


def add_note(fig: go.Figure, text: str) -> None:
    """A grey message in the middle of the plot area (empty input)."""
    fig.add_annotation(text=text, xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False,
                       font={"size": 14, "color": "#888"})  # fmt: skip
