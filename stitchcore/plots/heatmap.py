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

Skipped cells (no adapter joins the pair) are grey with an "×" and say why on hover; cells with
no value yet (a running matrix) stay white with a light "…" and ``pending`` as their hover text.  Diverging
penalty scales follow :mod:`stitchcore.plots.penalty` (worse = red, better = blue, the unit and the
direction in words on the colour bar and in the hover).  :func:`heatmap_csv` gives a panel's numbers as
CSV text; ``csv_value`` names what its cells hold (``penalty_pts``) in the corner cell.

>>> fig = heatmap([[0.9, None]], ["fc1"], ["block1", "fc2"], title="a", skipped={("fc1", "fc2"): "vector"})
>>> [t.name for t in fig.data], list(fig.data[1].text[0]), fig.data[1].customdata[0][1][2]
(['values', 'skipped'], ['', '×'], 'vector')
>>> print(heatmap_csv([[0.9, None]], ["fc1"], ["block1", "fc2"]), end="")
sender (A) \\ receiver (B),block1,fc2
fc1,0.9,
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from stitchcore.plots._style import add_note, clean, house_style
from stitchcore.plots.penalty import WORSE_COLOR, penalty_colorscale, penalty_words

__all__ = [
    "CELL_TEXT_LIMIT", "NEUTRAL_DIVERGING", "PENDING_MARK", "MARKED_SYMBOL", "SKIPPED_COLOR", "SKIPPED_MARK", "TICK_LIMIT",
    "cell_of_point", "heatmap", "heatmap_csv",
]  # fmt: skip

CELL_TEXT_LIMIT = 15  # values printed in the cells up to this many rows and columns
TICK_LIMIT = 30  # at most this many tick labels per axis (every cell keeps its hover)
SKIPPED_COLOR = "#BDBDBD"  # a skipped cell: mid grey, darker than any blank (not yet computed) cell
SKIPPED_MARK = "×"
MARKED_SYMBOL = "circle-open"  # a ring around a cell ``heatmap(marked=...)`` names (e.g. not above its control)
PENDING_MARK = "…"  # a cell not computed yet (running matrix): blank, a light "…", never grey
NEUTRAL_DIVERGING = "PuOr"  # a diverging scale with no better / worse meaning (purple-orange: not red-blue)


def heatmap(
    values: Sequence[Sequence[float | None]],
    rows: Sequence[str],
    cols: Sequence[str],
    *,
    title: str,
    row_label: str = "sender (A)",
    col_label: str = "receiver (B)",
    diverging: bool = False,
    higher_is_worse: bool | None = None,
    zmin: float | None = None,
    zmax: float | None = None,
    text_format: str = ".2f",
    value_label: str = "value",
    clickable: bool = False,
    skipped: Mapping[tuple[str, str], str] | None = None,
    pending: str | None = None,
    unit: str | None = None,
    csv_value: str | None = None,
    intervals: Sequence[Sequence[Sequence[float] | None]] | None = None,
    colorbar_title: str | None = None,
    marked: Mapping[tuple[str, str], str] | None = None,
) -> go.Figure:
    """A matrix ``values[i][j]`` for row ``rows[i]`` (top to bottom) and column ``cols[j]`` (left to right).

    ``None`` / NaN cells stay blank; with ``pending`` (e.g. "not computed yet") they say so on hover.
    ``skipped`` maps ``(row, column)`` to the reason the cell has no value: grey, marked "×", the
    reason on hover.  ``diverging`` centres the scale at 0 with symmetric limits; with
    ``higher_is_worse`` set it is the penalty scale (worse = red, better = blue, the direction in
    words on the colour bar and in the hover), else a neutral purple-orange one.  ``unit`` ("pts") goes
    on the colour bar and after every hovered value, which then reads as the cells print it.  Cells print
    their value (``text_format``) up to ``CELL_TEXT_LIMIT`` rows and columns.  ``csv_value`` (the name of
    the cells' quantity with its unit, ``penalty_pts``) is kept in ``layout.meta`` for the figure's CSV.  ``clickable`` adds
    the selectable cell markers (not on skipped cells; see the module docstring and
    :func:`cell_of_point`).  ``intervals`` ([rows][columns] of [lo, hi] in the values' units, or None per
    cell): each cell's 95% interval, on hover.  ``colorbar_title`` (lines joined by ``<br>``; the library's
    ``stitchcore.measures.meaning.colorbar_title(key)`` writes them) replaces the colour bar's title, which
    otherwise is ``value_label`` with the unit and direction words; its lines after the first are set small,
    "worse" in red on a penalty scale.  ``marked`` maps ``(row, column)`` to a note: those cells get a ring
    (:data:`MARKED_SYMBOL`) and the note on hover (e.g. "95% intervals overlap the control's").
    Raises ``ValueError`` when the matrix does not match ``rows`` x ``cols``.

    >>> heatmap([[0.5]], ["a"], ["b"], title="t", colorbar_title="CKA<br>(0 .. 1, higher = more similar)"
    ...         ).data[0].colorbar.title.text
    "CKA<br><span style='font-size:11px'>(0 .. 1, higher = more similar)</span>"
    """
    if len(values) != len(rows) or any(len(r) != len(cols) for r in values):
        got = f"{len(values)}x{'/'.join(sorted({str(len(r)) for r in values})) or 0}"
        raise ValueError(f"heatmap: values are {got}, expected {len(rows)} rows x {len(cols)} columns")
    rows_s, cols_s = [str(r) for r in rows], [str(c) for c in cols]
    why = {(str(r), str(c)): str(reason) for (r, c), reason in (skipped or {}).items()}
    z = [[None if (r, c) in why else v for v, c in zip(clean(row), cols_s)] for row, r in zip(values, rows_s)]
    finite = [v for r in z for v in r if v is not None]
    scale_title = value_label
    value_hover = value_label
    how = [unit] if unit else []
    if diverging:
        m = max(abs(v) for v in (zmin, zmax) if v is not None) if (zmin, zmax) != (None, None) else None
        if m is None:
            m = max((abs(v) for v in finite), default=1.0) or 1.0
        zmin, zmax = -m, m
        scale = NEUTRAL_DIVERGING if higher_is_worse is None else penalty_colorscale(higher_is_worse)
        if higher_is_worse is not None:
            how.append(penalty_words(higher_is_worse))
    else:
        scale = "Viridis"
    if how:
        words = ", ".join(how)
        scale_title = _scale_title(f"{value_label}<br>({words})", red_worse=True)
        value_hover = f"{value_label} ({words})"
    if colorbar_title:
        scale_title = _scale_title(colorbar_title, red_worse=higher_is_worse is not None)
    # with a unit the hover prints the value as the cell does, unit after it; else with 6 significant digits
    value_format = f"%{{z:{text_format}}} {unit}" if unit else "%{z:.6g}"
    # Integer positions + tick labels: names like "0" or repeated names never confuse the axis type.
    spans = _interval_texts(intervals, len(rows), len(cols), text_format, unit) if intervals else None
    custom = [[[r, c] + ([spans[i][j]] if spans else []) for j, c in enumerate(cols_s)] for i, r in enumerate(rows_s)]
    span_hover = "%{customdata[2]}" if spans else ""  # "<br>95% interval ..." where the cell has one
    small = len(rows) <= CELL_TEXT_LIMIT and len(cols) <= CELL_TEXT_LIMIT
    where = f"{row_label}: %{{customdata[0]}}<br>{col_label}: %{{customdata[1]}}<br>"
    hover = f"{where}{value_hover}: "
    fig = go.Figure(
        go.Heatmap(
            z=z, x=list(range(len(cols))), y=list(range(len(rows))), customdata=custom, name="values",
            colorscale=scale, zmin=zmin, zmax=zmax, zmid=0 if diverging else None, hoverongaps=False,
            texttemplate=f"%{{z:{text_format}}}" if small else None, textfont={"size": 11},
            colorbar={"title": {"text": scale_title}, "thickness": 14},
            hovertemplate=hover + value_format + span_hover + "<extra></extra>",
            hoverinfo="skip" if clickable else None,
        )
    )  # fmt: skip
    if why:
        _add_overlay(fig, rows_s, cols_s, lambda r, c: why.get((r, c)), "skipped", SKIPPED_COLOR, SKIPPED_MARK,
                     where + "skipped: %{customdata[2]}<extra></extra>")  # fmt: skip
    if pending:
        def waiting(r: str, c: str) -> str | None:
            return pending if z[rows_s.index(r)][cols_s.index(c)] is None and (r, c) not in why else None

        _add_overlay(fig, rows_s, cols_s, waiting, "pending", "rgba(0,0,0,0)", PENDING_MARK,
                     where + "%{customdata[2]}<extra></extra>", mark_color="#9E9E9E")  # fmt: skip
    if marked:
        ring = {(str(r), str(c)): str(n) for (r, c), n in marked.items()}
        at = [(j, i, ring[(r, c)]) for i, r in enumerate(rows_s) for j, c in enumerate(cols_s) if (r, c) in ring]
        fig.add_trace(go.Scatter(
            x=[p[0] for p in at], y=[p[1] for p in at], mode="markers", name="marked", showlegend=False,
            marker={"symbol": MARKED_SYMBOL, "size": max(10, min(34, int(440 / max(len(rows), len(cols), 1)))),
                    "color": "#212121", "line": {"width": 1.5}},
            customdata=[[rows_s[p[1]], cols_s[p[0]], p[2]] for p in at],
            hovertemplate=where + "%{customdata[2]}<extra></extra>",
        ))  # fmt: skip
    if clickable:
        _add_cell_markers(fig, z, rows_s, cols_s, hover + value_format.replace("%{z", "%{customdata[2]")
                          + ("%{customdata[3]}" if spans else ""), set(why), spans)  # fmt: skip
    if not finite:
        add_note(fig, "no values yet" if not why else "no values (every pair skipped)")

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
    if csv_value:
        fig.update_layout(meta={"csv_value": csv_value})
    return fig


def _scale_title(text: str, *, red_worse: bool) -> str:
    """A colour-bar title: its first line as given, the rest small (and "worse" red on a penalty scale)."""
    head, _, rest = text.partition("<br>")
    if not rest:
        return head
    if red_worse:
        rest = rest.replace("worse", f"<span style='color:{WORSE_COLOR}'>worse</span>")
    return f"{head}<br><span style='font-size:11px'>{rest}</span>"


def _add_overlay(
    fig: go.Figure, rows: list[str], cols: list[str], text_of: Any, name: str, color: str, mark: str, hover: str,
    mark_color: str = "#424242",
) -> None:  # fmt: skip
    """A second heat map over the cells where ``text_of(row, col)`` is not None: one flat colour, ``mark``
    printed in those cells (``text``), the note on hover (``customdata[2]``, after the row and column names)."""
    notes = [[text_of(r, c) for c in cols] for r in rows]
    fig.add_trace(
        go.Heatmap(
            z=[[None if n is None else 1.0 for n in row] for row in notes], x=list(range(len(cols))),
            y=list(range(len(rows))), customdata=[[[r, c, n or ""] for c, n in zip(cols, row)]
                                                  for r, row in zip(rows, notes)],
            text=[["" if n is None else mark for n in row] for row in notes], texttemplate="%{text}", name=name,
            colorscale=[[0, color], [1, color]], showscale=False, hoverongaps=False,
            textfont={"size": 16, "color": mark_color}, hovertemplate=hover,
        )
    )  # fmt: skip


def _interval_texts(intervals: Any, n_rows: int, n_cols: int, text_format: str, unit: str | None) -> list[list[str]]:
    """Each cell's hover line for its 95% interval ("<br>95% interval: 0.93 – 0.97"), "" where it has none."""
    out = [["" for _ in range(n_cols)] for _ in range(n_rows)]
    for i, row in enumerate(list(intervals or [])[:n_rows]):
        for j, ci in enumerate(row[:n_cols]):
            if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(v, (int, float)) for v in ci):
                lo, hi = (format(float(v), text_format if unit else ".4f") for v in ci)
                out[i][j] = f"<br>95% interval over the test images: {lo} – {hi}{f' {unit}' if unit else ''}"
    return out


def _add_cell_markers(
    fig: go.Figure, z: list[list[float | None]], rows: list[str], cols: list[str], hover: str,
    skipped: set[tuple[str, str]], spans: list[list[str]] | None = None,
) -> None:  # fmt: skip
    """One invisible square per cell that can be opened (centre of the cell); a clicked one gets a dark outline.
    ``hover`` is the whole hover text up to the value, which it prints from ``customdata[2]`` (and the cell's
    interval line from ``customdata[3]``)."""
    xs, ys, data = [], [], []
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            if (r, c) in skipped:
                continue
            xs.append(j)
            ys.append(i)
            data.append([r, c, z[i][j]] + ([spans[i][j]] if spans else []))
    size = max(8, min(40, int(520 / max(len(rows), len(cols), 1))))
    fig.add_trace(
        go.Scatter(
            x=xs, y=ys, customdata=data, mode="markers", name="cells", showlegend=False,
            marker={"symbol": "square-open", "size": size, "color": "#222", "opacity": 0.0,
                    "line": {"width": 3}},
            selected={"marker": {"opacity": 1.0}}, unselected={"marker": {"opacity": 0.0}},
            hovertemplate=hover + "<extra>click to open</extra>",
        )
    )  # fmt: skip


def cell_of_point(point: Mapping[str, Any]) -> tuple[str, str] | None:
    """(row name, column name) of a selected cell marker (a Streamlit selection point), else None."""
    data = point.get("customdata")
    if isinstance(data, (list, tuple)) and len(data) >= 2 and all(isinstance(v, str) for v in data[:2]):
        return data[0], data[1]
    return None


def heatmap_csv(
    values: Sequence[Sequence[float | None]],
    rows: Sequence[str],
    cols: Sequence[str],
    *,
    row_label: str = "sender (A)",
    col_label: str = "receiver (B)",
    value_name: str | None = None,
    intervals: Sequence[Sequence[Sequence[float] | None]] | None = None,
) -> str:
    """A panel's numbers as CSV text: a header of the column names, then one line per row name.

    The corner cell names both axes (``"sender (A) \\ receiver (B)"``), after what the cells hold when
    ``value_name`` says it (``"penalty_pts: sender (A) \\ receiver (B)"``); cells without a value
    (skipped, not computed, NaN) are empty; numbers are written exactly (``repr`` of the float).
    ``intervals`` (each cell's 95% [lo, hi] or None, in the values' units): two more blocks after an empty
    line, the low ends then the high ends, each headed like the first (``"95% low: ..."``).
    Raises ``ValueError`` when the matrix does not match ``rows`` x ``cols``.

    >>> print(heatmap_csv([[0.5]], ["a"], ["b"], intervals=[[[0.4, 0.6]]]), end="")
    sender (A) \\ receiver (B),b
    a,0.5
    <BLANKLINE>
    95% low: sender (A) \\ receiver (B),b
    a,0.4
    95% high: sender (A) \\ receiver (B),b
    a,0.6
    """
    if len(values) != len(rows) or any(len(r) != len(cols) for r in values):
        raise ValueError(f"heatmap_csv: values do not match {len(rows)} rows x {len(cols)} columns")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    corner = f"{row_label} \\ {col_label}"
    writer.writerow([f"{value_name}: {corner}" if value_name else corner, *map(str, cols)])
    for name, row in zip(rows, values):
        writer.writerow([str(name), *("" if v is None else repr(v) for v in clean(row))])
    if intervals is not None and any(ci for row in intervals for ci in row):
        writer.writerow([])
        for end, word in ((0, "low"), (1, "high")):
            writer.writerow([f"95% {word}: {corner}", *map(str, cols)])
            for name, row in zip(rows, intervals):
                writer.writerow([str(name), *("" if not ci or ci[end] is None else repr(float(ci[end])) for ci in row)])
    return out.getvalue()
