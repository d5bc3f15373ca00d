"""Heat maps of layer-pair matrices (stitching accuracy, controls, CKA), in the house style of ``plots``.

Rows are A's (sender) cuts top to bottom, columns B's (receiver) cuts left to right, both in
execution order.  ``clickable=True`` lays an invisible marker on every cell so that a click
selects the cell (Streamlit's ``on_select`` reports scatter points, not heat-map cells); the
marker's ``customdata`` is ``[row name, column name, value]``.

>>> fig = heatmap([[0.9, None]], ["block1"], ["block1", "block2"], title="accuracy")
>>> fig.layout.yaxis.autorange
'reversed'
>>> heatmap([[0.9, None]], ["block1"], ["block1", "block2"], title="a", clickable=True).layout.yaxis.range
(0.5, -0.5)
>>> cell_of_point({"customdata": ["block1", "block2", None]})
('block1', 'block2')
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from stitchcore.plots._style import add_note, clean, house_style

__all__ = ["CELL_TEXT_LIMIT", "TICK_LIMIT", "cell_of_point", "heatmap"]

CELL_TEXT_LIMIT = 15  # values printed in the cells up to this many rows and columns
TICK_LIMIT = 30  # at most this many tick labels per axis (every cell keeps its hover)


def heatmap(
    values: Sequence[Sequence[float | None]],
    rows: Sequence[str],
    cols: Sequence[str],
    *,
    title: str,
    row_label: str = "sender (A)",
    col_label: str = "receiver (B)",
    diverging: bool = False,
    zmin: float | None = None,
    zmax: float | None = None,
    text_format: str = ".2f",
    value_label: str = "value",
    clickable: bool = False,
) -> go.Figure:
    """A matrix ``values[i][j]`` for row ``rows[i]`` (top to bottom) and column ``cols[j]`` (left to right).

    ``None`` / NaN cells stay blank.  ``diverging`` uses a red-blue scale centred at 0 with
    symmetric limits (e.g. debiased accuracy = trained − control).  Cells print their value
    (``text_format``) up to ``CELL_TEXT_LIMIT`` rows and columns.  ``clickable`` adds the
    selectable cell markers (see the module docstring and :func:`cell_of_point`).
    Raises ``ValueError`` when the matrix does not match ``rows`` x ``cols``.
    """
    if len(values) != len(rows) or any(len(r) != len(cols) for r in values):
        got = f"{len(values)}x{'/'.join(sorted({str(len(r)) for r in values})) or 0}"
        raise ValueError(f"heatmap: values are {got}, expected {len(rows)} rows x {len(cols)} columns")
    z = [clean(r) for r in values]
    finite = [v for r in z for v in r if v is not None]
    if diverging:
        m = max(abs(v) for v in (zmin, zmax) if v is not None) if (zmin, zmax) != (None, None) else None
        if m is None:
            m = max((abs(v) for v in finite), default=1.0) or 1.0
        zmin, zmax, scale = -m, m, "RdBu"
    else:
        scale = "Viridis"
    rows_s, cols_s = [str(r) for r in rows], [str(c) for c in cols]
    # Integer positions + tick labels: names like "0" or repeated names never confuse the axis type.
    custom = [[[r, c] for c in cols_s] for r in rows_s]
    small = len(rows) <= CELL_TEXT_LIMIT and len(cols) <= CELL_TEXT_LIMIT
    hover = f"{row_label}: %{{customdata[0]}}<br>{col_label}: %{{customdata[1]}}<br>{value_label}: "
    fig = go.Figure(
        go.Heatmap(
            z=z, x=list(range(len(cols))), y=list(range(len(rows))), customdata=custom,
            colorscale=scale, zmin=zmin, zmax=zmax, zmid=0 if diverging else None, hoverongaps=False,
            texttemplate=f"%{{z:{text_format}}}" if small else None, textfont={"size": 11},
            colorbar={"title": {"text": value_label}, "thickness": 14},
            hovertemplate=hover + "%{z:.6g}<extra></extra>",
            hoverinfo="skip" if clickable else None,
        )
    )  # fmt: skip
    if clickable:
        _add_cell_markers(fig, z, rows_s, cols_s, hover)
    if not finite:
        add_note(fig, "no values yet")

    def ticks(names: list[str]) -> dict[str, Any]:
        step = max(1, math.ceil(len(names) / TICK_LIMIT))
        keep = list(range(0, len(names), step))
        return {"tickvals": keep, "ticktext": [names[i] for i in keep]}

    fig.update_xaxes(title_text=col_label, showgrid=False, zeroline=False, **ticks(cols_s))
    fig.update_yaxes(title_text=row_label, showgrid=False, zeroline=False, **ticks(rows_s))
    fig.update_yaxes(autorange="reversed")  # rows[0] at the top: senders read downwards in execution order
    height = int(min(900, max(320, 160 + 26 * len(rows))))
    fig = house_style(fig, title, height=height, legend=False)
    if clickable:  # fixed ranges: the markers' size must not pad the axes (plotly autorange would)
        fig.update_xaxes(range=[-0.5, len(cols) - 0.5])
        fig.update_yaxes(range=[len(rows) - 0.5, -0.5], autorange=False)
        fig.update_layout(clickmode="event+select", dragmode=False, hovermode="closest")
    return fig


def _add_cell_markers(
    fig: go.Figure, z: list[list[float | None]], rows: list[str], cols: list[str], hover: str
) -> None:
    """One invisible square per cell (centre of the cell); a clicked one gets a dark outline."""
    xs, ys, data = [], [], []
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            xs.append(j)
            ys.append(i)
            data.append([r, c, z[i][j]])
    size = max(8, min(40, int(520 / max(len(rows), len(cols), 1))))
    fig.add_trace(
        go.Scatter(
            x=xs, y=ys, customdata=data, mode="markers", name="cells", showlegend=False,
            marker={"symbol": "square-open", "size": size, "color": "#222", "opacity": 0.0,
                    "line": {"width": 3}},
            selected={"marker": {"opacity": 1.0}}, unselected={"marker": {"opacity": 0.0}},
            hovertemplate=hover + "%{customdata[2]:.6g}<extra>click to open</extra>",
        )
    )  # fmt: skip


def cell_of_point(point: Mapping[str, Any]) -> tuple[str, str] | None:
    """(row name, column name) of a selected cell marker (a Streamlit selection point), else None."""
    data = point.get("customdata")
    if isinstance(data, (list, tuple)) and len(data) >= 2 and all(isinstance(v, str) for v in data[:2]):
        return data[0], data[1]
    return None
