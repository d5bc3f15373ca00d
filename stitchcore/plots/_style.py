"""The house style of every StitchLab figure: colours, sizes, layout and small value helpers.

Private to :mod:`stitchcore.plots`: the figure modules (runs, heatmap, lm, traits) share it so
that every figure looks alike.  Template ``plotly_white``, short titles, every axis titled, the
legend on top, and three fixed colours for the three models of a stitch (Okabe-Ito, colour-blind
safe).

>>> clean([1, float("nan"), None, 2.5])
[1.0, None, None, 2.5]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

__all__ = [
    "ACCURACY_COLOR", "HEIGHT", "LAYOUT_COLORS", "LOSS_COLOR", "ROLE_COLORS", "ROLE_NAMES", "RUN_COLORS",
    "TEMPLATE", "WAITING", "add_note", "clean", "finite", "house_style",
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


def finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def clean(values: Sequence[Any]) -> list[float | None]:
    """Floats with NaN / inf / None as None (a gap in a line, null in JSON)."""
    return [float(v) if finite(v) else None for v in values]


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


def add_note(fig: go.Figure, text: str) -> None:
    """A grey message in the middle of the plot area (empty input)."""
    fig.add_annotation(text=text, xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False,
                       font={"size": 14, "color": "#888"})  # fmt: skip
