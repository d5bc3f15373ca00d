"""Plotly figures of a trait sweep (``sweep`` runs), in the house style of :mod:`stitchcore.plots`.

Each builder takes the sweep's plot-ready data (``stitchcore.experiments.sweep.curves`` of the
finished positions, plus the A-only / B-only references) and returns a figure; a running sweep
draws the positions it has so far on the full x axis.

* :func:`trait_curves`: one line per trait metric vs cut position, each value's 95% interval over its test
  examples as an error bar (``stitched_ci``; sweeps stored before intervals have none), A and B reference
  lines (dashed A, dotted B, in the metric's colour; their intervals on hover), the random-init control as a
  shaded band, the noise-sender control (``curves["noise_sender"]``, where the sweep ran it) as a dashed grey
  line with x markers (its interval on hover).
* :func:`simplicity_curves`: gradient norm, sharpness and gzip size vs position (lower = simpler), raw
  (one panel each, with A and B lines) or normalised as (value - B) / (A - B): 0 = like B, 1 = like A,
  only for a measure whose A and B differ by more than their noise (:func:`normalization_noise`).
* :func:`per_class_heatmap`: accuracy of every class at every position (each cell's interval on hover).
* :func:`penalty_curve`: the stitching penalty (B's accuracy − stitched accuracy, in points, higher =
  worse) at every position, the control's as a band, the noise sender's as a dashed grey line; the worse side
  named beside the y axis.
* :func:`penalty_lines`: the penalty of several sweeps on one axis (a preset's figure: one line per
  model pair, references dashed).

>>> c = {"positions": ["fc1", "fc2"], "stitched": {"accuracy": [0.9, 0.8]}, "control": None}
>>> ref = {"a": {"metrics": {"accuracy": 0.95}}, "b": {"metrics": {"accuracy": 0.97}}}
>>> [t.name for t in trait_curves(c, ref, ["accuracy"]).data]
['accuracy', 'A alone', 'B alone']
>>> c["noise_sender"] = {"metrics": {"accuracy": [0.85, 0.88]}, "metrics_ci": {"accuracy": [[0.8, 0.9], None]}}
>>> [(t.name, t.line.dash) for t in trait_curves(c, ref, ["accuracy"]).data][1]
('noise sender', 'dash')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from stitchcore.plots import heatmap as plots_heatmap
from stitchcore.plots._style import (
    HEIGHT,
    ROLE_COLORS,
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
from stitchcore.plots.penalty import PENALTY_AXIS, PENALTY_COLUMN, PTS, mark_worse_side, penalty_pts

__all__ = ["REPORT_LABELS", "SIMPLICITY_AXES", "SIMPLICITY_LABELS", "SIMPLICITY_NOISE", "normalization_noise", "penalty_curve",
           "penalty_lines", "per_class_heatmap", "simplicity_curves", "trait_curves"]

SIMPLICITY_LABELS = {"grad_norm": "gradient norm", "sharpness": "sharpness", "gzip_bits": "gzip size (bits)"}
# The Oxford report's own definitions (measures.simplicity.report_simplicity), drawn beside the project's
REPORT_LABELS = {"grad_norm_batch": "gradient norm, per batch", "sharpness_abs": "sharpness, absolute 1e-3",
                 "gzip_bits_all": "gzip, all parameters (bits)"}  # fmt: skip


NOISE_COLOR = "#666666"  # the noise-sender control: a grey reference, not a model's colour
NOISE_NAME = "noise sender"


def _noise_line(values: Sequence[Any], spans: Sequence[Any], positions: Sequence[str], what: str,
                show: bool, fmt: str = ".3f", unit: str = "") -> go.Scatter:  # fmt: skip
    """The noise-sender control as a dashed grey line with x markers, each value's interval on hover."""
    pairs = [interval(ci) for ci in spans][: len(values)]
    pairs += [None] * (len(values) - len(pairs))
    words = [f"{p}" + ("" if s is None else f" (95% interval {s[0]:{fmt}} – {s[1]:{fmt}})")
             for p, s in zip(positions, pairs)]  # fmt: skip
    return go.Scatter(x=list(range(len(values))), y=list(values), mode="lines+markers", name=NOISE_NAME,
                      legendgroup="noise", showlegend=show, customdata=words,
                      line={"color": NOISE_COLOR, "dash": "dash", "width": 1.5},
                      marker={"symbol": "x", "size": 7, "color": NOISE_COLOR},
                      hovertemplate=f"{NOISE_NAME}, {what}<br>cut %{{customdata}}: %{{y:{fmt}}}{unit}<extra></extra>")


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _x_axis(fig: go.Figure, positions: Sequence[str], row: int | None = None, col: int | None = None) -> None:
    fig.update_xaxes(title_text="cut position (A up to here, B after)", tickmode="array",
                     tickvals=list(range(len(positions))), ticktext=list(positions),
                     range=[-0.3, max(len(positions) - 0.7, 0.7)], row=row, col=col)  # fmt: skip


def _ref_line(fig: go.Figure, n: int, y: float | None, name: str, color: str, dash: str, show: bool,
              ci: Any = None, **rc) -> None:  # fmt: skip
    if y is None:
        return
    span = interval(ci)
    words = f" (95% interval {span[0]:.3f} – {span[1]:.3f})" if span else ""
    fig.add_trace(go.Scatter(x=[-0.3, max(n - 0.7, 0.7)], y=[y, y], mode="lines", name=name, legendgroup=name,
                             showlegend=show, line={"color": color, "dash": dash, "width": 1.5},
                             hovertemplate=f"{name}: {y:.4g}{words}<extra></extra>"), **rc)  # fmt: skip


def _error_bars(values: Sequence[float | None], spans: Sequence[Any], color: str) -> tuple[dict | None, list[str]]:
    """Error bars from each value's stored [lo, hi] (None: no value has one) and each one's hover words."""
    pairs = [interval(ci) for ci in spans][: len(values)]
    pairs += [None] * (len(values) - len(pairs))
    words = ["" if p is None else f" (95% interval {p[0]:.3f} – {p[1]:.3f})" for p in pairs]
    return error_bars(values, pairs, color=color, width=5), words


def trait_curves(
    curves: Mapping[str, Any],
    reference: Mapping[str, Any] | None,
    metrics: Sequence[str],
    *,
    labels: Mapping[str, str] | None = None,
    all_positions: Sequence[str] | None = None,
    title: str | None = "Trait metrics along the cut",
) -> go.Figure:
    """Trait metrics vs cut position; ``all_positions`` fixes the x axis while a sweep is running."""
    positions = list(all_positions or curves.get("positions") or [])
    done = len(curves.get("positions") or [])
    labels = labels or {}
    fig = go.Figure()
    control = curves.get("control") or {}
    noise = curves.get("noise_sender") or {}
    for i, key in enumerate(metrics):
        color = RUN_COLORS[i % len(RUN_COLORS)]
        name = labels.get(key, key)
        band = control.get(key)
        if band and done:  # one closed polygon per metric: max left to right, then min right to left
            lo, hi = clean(band["min"]), clean(band["max"])
            keep = [j for j in range(done) if lo[j] is not None and hi[j] is not None]
            fig.add_trace(go.Scatter(x=keep + keep[::-1], y=[hi[j] for j in keep] + [lo[j] for j in keep[::-1]],
                                     mode="lines", fill="toself", fillcolor=_rgba(color, 0.15),
                                     line={"color": _rgba(color, 0.5), "width": 1}, name="random-init control",
                                     legendgroup="control", showlegend=i == 0,
                                     hovertemplate=f"control, {name}: %{{y:.3f}}<extra></extra>"))  # fmt: skip
        values = clean(curves["stitched"].get(key, []))
        error, words = _error_bars(values, (curves.get("stitched_ci") or {}).get(key) or [], color)
        fig.add_trace(go.Scatter(x=list(range(done)), y=values, mode="lines+markers",
                                 name=name, line={"color": color, "width": 2.5}, marker={"size": 8},
                                 customdata=positions[:done], text=words if error else None, error_y=error,
                                 hovertemplate=f"{name}<br>cut %{{customdata}}: %{{y:.3f}}"
                                               f"{'%{text}' if error else ''}<extra></extra>"))  # fmt: skip
        noise_values = clean((noise.get("metrics") or {}).get(key) or [])[:done]
        if any(v is not None for v in noise_values):
            fig.add_trace(_noise_line(noise_values, (noise.get("metrics_ci") or {}).get(key) or [], positions[:done],
                                      name, show=i == 0))  # fmt: skip
        if reference:
            ref = {r: reference.get(r) or {} for r in ("a", "b")}
            for r, dash in (("a", "dash"), ("b", "dot")):
                _ref_line(fig, len(positions), ref[r].get("metrics", {}).get(key), f"{r.upper()} alone", color, dash,
                          i == 0, ci=(ref[r].get("metrics_ci") or {}).get(key))  # fmt: skip
    _x_axis(fig, positions)
    fig.update_yaxes(title_text="rate", range=[-0.03, 1.05])
    if not done:
        add_note(fig, WAITING if positions else "no positions yet")
    return house_style(fig, title)


# Below these, A and B are not told apart by a measure, and (value − B) / (A − B) would divide by noise.
# Relative difference |A − B| / mean(|A|, |B|): same-recipe digit models that differ only in their seed
# (six CNNs and six MLPs, default recipes) differ by up to 48% in gradient norm and 0.19% in gzip size.
SIMPLICITY_NOISE = {"grad_norm": 0.5, "gzip_bits": 0.005}
# Sharpness is an average over random draws: its floor is 2 standard errors of A − B over those draws
# (each side's sharpness_std / sqrt(draws)), from the run itself (near 0 a relative floor means nothing).
SHARPNESS_STANDARD_ERRORS = 2.0
# Each raw panel's y axis: what its values are, and which way is simpler (lower, for all three).
SIMPLICITY_AXES = {"grad_norm": "‖∇L‖₂<br>(lower = simpler)", "sharpness": "mean loss increase<br>(lower = simpler)",
                   "gzip_bits": "bits<br>(lower = simpler)", "grad_norm_batch": "mean ‖∇L_batch‖₂<br>(lower = simpler)",
                   "sharpness_abs": "mean loss increase<br>(lower = simpler)",
                   "gzip_bits_all": "bits<br>(lower = simpler)"}  # fmt: skip
_UNITS = {"gzip_bits": " bits"}  # after the numbers of the "no normalised curve" note


def normalization_noise(key: str, ref_a: Mapping[str, Any], ref_b: Mapping[str, Any]) -> tuple[float, float] | None:
    """``(|A − B|, noise floor)`` of simplicity measure ``key`` from A's and B's ``simplicity`` dicts, or None
    when either value is missing.  The floor is :data:`SIMPLICITY_NOISE` times the mean of |A| and |B|, and
    for sharpness :data:`SHARPNESS_STANDARD_ERRORS` standard errors of A − B over the draws (0 when a stored
    run lacks ``sharpness_std``).  (value − B) / (A − B) is drawn only where the difference exceeds the floor.

    >>> normalization_noise("gzip_bits", {"gzip_bits": 459224}, {"gzip_bits": 459400})
    (176.0, 2296.56)
    >>> normalization_noise("sharpness", {"sharpness": 0.02, "sharpness_std": 0.01, "draws": 4},
    ...                     {"sharpness": 0.01, "sharpness_std": 0.0, "draws": 4})
    (0.01, 0.01)
    """
    a, b = (_value(r.get(key)) for r in (ref_a, ref_b))
    if a is None or b is None:
        return None
    diff = abs(a - b)
    if key == "sharpness":
        se = [_value(r.get("sharpness_std")) for r in (ref_a, ref_b)]
        draws = [r.get("draws") or 1 for r in (ref_a, ref_b)]
        floor = 0.0 if None in se else SHARPNESS_STANDARD_ERRORS * sum(e * e / d for e, d in zip(se, draws)) ** 0.5
    else:
        floor = SIMPLICITY_NOISE.get(key, 0.0) * (abs(a) + abs(b)) / 2
    return round(diff, 10), round(floor, 10)


def _value(v: Any) -> float | None:
    return clean([v])[0]


def _amount(v: float) -> str:
    """A difference or a floor in the note: 3 significant digits, whole numbers from 1,000 on (bits)."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def _normalized(values: Sequence[float | None], a: float, b: float) -> list[float | None]:
    return [None if v is None else (v - b) / (a - b) for v in clean(values)]


def _add_below(fig: go.Figure, lines: list[str]) -> None:
    """Grey lines of text under the x axis (why a curve is missing), the bottom margin grown to hold them."""
    fig.add_annotation(text="<br>".join(lines), xref="paper", yref="paper", x=0.0, y=0.0, xanchor="left",
                       yanchor="top", yshift=-48, showarrow=False, align="left", name="no-normalised-curve",
                       font={"size": 12, "color": "#555"})  # fmt: skip
    fig.update_layout(margin={"b": 64 + 18 * len(lines)}, height=(fig.layout.height or HEIGHT) + 18 * len(lines))


def simplicity_curves(
    curves: Mapping[str, Any],
    reference: Mapping[str, Any] | None,
    *,
    normalized: bool = False,
    all_positions: Sequence[str] | None = None,
    title: str | None = None,
    definitions: str = "project",
) -> go.Figure:
    """Simplicity measures vs cut position: raw (three panels, lower = simpler on every y axis) or normalised
    to A and B (one panel: 0 = like B, 1 = like A; each line's name says which way is simpler).
    ``definitions="report"``: the raw panels of the Oxford report's own definitions (:data:`REPORT_LABELS`).

    A measure whose A and B differ by less than their noise (:func:`normalization_noise`) gets no normalised
    curve: a line under the plot says so, with both numbers.
    """
    positions = list(all_positions or curves.get("positions") or [])
    simp = curves.get("simplicity") or {}
    done = len(curves.get("positions") or [])
    refs = {r: (reference or {}).get(r, {}).get("simplicity") or {} for r in ("a", "b")}
    if normalized:
        fig = go.Figure()
        missing = []
        for i, (key, label) in enumerate(SIMPLICITY_LABELS.items()):
            noise = normalization_noise(key, refs["a"], refs["b"])
            if noise is None:
                continue
            diff, floor = noise
            a, b = refs["a"][key], refs["b"][key]
            if diff <= floor or diff == 0:
                unit = _UNITS.get(key, "")
                missing.append(f"{label}: A and B differ by less than their noise (|A − B| = {_amount(diff)}{unit} "
                               f"vs {_amount(floor)}{unit}): no normalised curve")  # fmt: skip
                continue
            way = "higher" if a < b else "lower"  # 1 = like A: higher is simpler when A is the simpler one
            name = f"{label} ({way} = simpler)"
            fig.add_trace(go.Scatter(x=list(range(done)), y=_normalized(simp.get(key, []), a, b), mode="lines+markers",
                                     name=name, customdata=clean(simp.get(key, [])),
                                     line={"color": RUN_COLORS[i], "width": 2.5}, marker={"size": 8},
                                     hovertemplate=f"{name}: %{{y:.3f}} (raw %{{customdata:.4g}})<extra></extra>"))
        _ref_line(fig, len(positions), 1.0, "A alone (1)", "#0072B2", "dash", True)
        _ref_line(fig, len(positions), 0.0, "B alone (0)", "#E69F00", "dot", True)
        _x_axis(fig, positions)
        fig.update_yaxes(title_text="(value − B) / (A − B)<br>0 = like B, 1 = like A")
        fig = house_style(fig, title or "Simplicity, normalised: 0 = B, 1 = A")
        if not done:
            add_note(fig, WAITING)
        elif missing and len(missing) == len(SIMPLICITY_LABELS):
            add_note(fig, "no normalised curve: A and B differ by less than their noise")
        if missing:
            _add_below(fig, missing)
        return fig
    labels = REPORT_LABELS if definitions == "report" else SIMPLICITY_LABELS
    fig = make_subplots(rows=1, cols=3, subplot_titles=list(labels.values()), horizontal_spacing=0.11)
    for j, (key, label) in enumerate(labels.items(), start=1):
        fig.add_trace(go.Scatter(x=list(range(done)), y=clean(simp.get(key, [])), mode="lines+markers",
                                 name="stitched", legendgroup="stitched", showlegend=j == 1,
                                 line={"color": ROLE_COLORS["stitched"], "width": 2.5}, marker={"size": 7},
                                 customdata=positions[:done],
                                 hovertemplate=f"{label}<br>cut %{{customdata}}: %{{y:.4g}}<extra></extra>"),
                      row=1, col=j)  # fmt: skip
        for role, dash in (("a", "dash"), ("b", "dot")):
            _ref_line(fig, len(positions), refs[role].get(key), f"{role.upper()} alone", ROLE_COLORS[role], dash,
                      j == 1, row=1, col=j)  # fmt: skip
        _x_axis(fig, positions, row=1, col=j)
        fig.update_yaxes(title_text=SIMPLICITY_AXES[key], row=1, col=j)
    fig.update_xaxes(title_text=None)
    default = "Simplicity, the report's definitions (raw; lower = simpler)" if definitions == "report" else \
        "Simplicity (raw; lower = simpler)"
    fig = house_style(fig, title or default, height=HEIGHT)
    fig.update_layout(margin={"t": 100}, legend={"y": 1.16})  # the legend above the panel titles
    if not done:
        add_note(fig, WAITING)
    return fig


def per_class_heatmap(
    curves: Mapping[str, Any], classes: Sequence[str], *, all_positions: Sequence[str] | None = None,
    title: str = "Per-class accuracy of the stitched model", colorbar_title: str | None = None,
) -> go.Figure:  # fmt: skip
    """Classes (rows) x cut positions (columns); positions not finished yet stay blank.  Each cell's 95% interval
    over the class's test images (``per_class_ci``, where the sweep stored it) shows on hover; ``colorbar_title``
    says what the colour means (``measures.meaning.colorbar_title("class_acc")``)."""
    positions = list(all_positions or curves.get("positions") or [])
    done = len(curves.get("positions") or [])
    per_class = curves.get("per_class") or [[] for _ in classes]
    values = [list(row[:done]) + [None] * (len(positions) - done) for row in per_class]
    spans = curves.get("per_class_ci")
    has_ci = bool(spans) and any(ci is not None for row in spans for ci in row)
    intervals = [list(row[:done]) + [None] * (len(positions) - done) for row in spans] if has_ci else None
    return plots_heatmap.heatmap(values, list(classes), positions, title=title, row_label="class",
                                 col_label="cut position", zmin=0.0, zmax=1.0, value_label="accuracy",
                                 intervals=intervals, colorbar_title=colorbar_title)  # fmt: skip



def _penalty_spans(stored: Any, n: int) -> list[tuple[float, float] | None]:
    """The first ``n`` stored penalty intervals (fractions) as (lo, hi) in points; None where there is none."""
    spans = [interval(ci) for ci in list(stored or [])[:n]]
    spans += [None] * (n - len(spans))
    return [None if s is None else (penalty_pts(s[0]), penalty_pts(s[1])) for s in spans]


def _span_words(positions: Sequence[str], spans: Sequence[tuple[float, float] | None]) -> list[str]:
    """Each cut's hover name, with its penalty interval where it has one ("fc1 [+0.4, +2.9]")."""
    return [p if s is None else f"{p} [{s[0]:+.1f}, {s[1]:+.1f}]" for p, s in zip(positions, spans)]


def penalty_curve(
    curves: Mapping[str, Any], reference: Mapping[str, Any] | None, *, all_positions: Sequence[str] | None = None,
    title: str | None = "Stitching penalty along the cut",
) -> go.Figure:  # fmt: skip
    """Penalty = B's accuracy − stitched accuracy (Bansal et al.) in points, higher = worse, at every cut position.

    Reads the ``accuracy`` metric of the sweep (``curves["stitched"]``, the random-init control's band)
    and B's own accuracy (``reference["b"]``); a sweep without the accuracy metric gets a note instead.  The
    noise sender's penalty (``curves["noise_sender"]["penalty"]``, paired interval on hover) is a dashed grey line.

    >>> c = {"positions": ["fc1"], "stitched": {"accuracy": [0.9]}, "control": None}
    >>> penalty_curve(c, {"b": {"metrics": {"accuracy": 0.95}}}).data[0].y
    (5.0,)
    """
    positions = list(all_positions or curves.get("positions") or [])
    done = len(curves.get("positions") or [])
    base = ((reference or {}).get("b") or {}).get("metrics", {}).get("accuracy")
    stitched = (curves.get("stitched") or {}).get("accuracy")
    fig = go.Figure()

    def penalty(values: Sequence[Any]) -> list[float | None]:
        return [None if v is None else penalty_pts(round(base - v, 6)) for v in clean(values)]

    if base is not None and stitched is not None:
        band = (curves.get("control") or {}).get("accuracy")
        if band and done:  # B − max .. B − min of the random-init control stitches
            lo, hi = penalty(band["max"]), penalty(band["min"])
            keep = [j for j in range(done) if lo[j] is not None and hi[j] is not None]
            fig.add_trace(go.Scatter(x=keep + keep[::-1], y=[hi[j] for j in keep] + [lo[j] for j in keep[::-1]],
                                     mode="lines", fill="toself", fillcolor=_rgba("#999999", 0.2),
                                     line={"color": _rgba("#999999", 0.6), "width": 1}, name="random-init control",
                                     hovertemplate=f"control penalty: %{{y:+.1f}} {PTS}<extra></extra>"))  # fmt: skip
        values = penalty(stitched[:done])
        spans = _penalty_spans(curves.get("penalty_ci"), done)
        fig.add_trace(go.Scatter(x=list(range(done)), y=values, mode="lines+markers",
                                 name="stitched", line={"color": ROLE_COLORS["stitched"], "width": 2.5},
                                 marker={"size": 8}, customdata=_span_words(positions[:done], spans),
                                 error_y=error_bars(values, spans, color=ROLE_COLORS["stitched"], width=5),
                                 hovertemplate=f"cut %{{customdata}}: penalty %{{y:+.1f}} {PTS}<extra></extra>"))
        noise = curves.get("noise_sender") or {}
        noise_values = [None if v is None else penalty_pts(v) for v in clean(noise.get("penalty") or [])][:done]
        if any(v is not None for v in noise_values):
            spans = [None if s is None else [penalty_pts(s[0]), penalty_pts(s[1])]
                     for s in (interval(ci) for ci in (noise.get("penalty_ci") or []))]  # fmt: skip
            fig.add_trace(_noise_line(noise_values, spans, positions[:done], "penalty", show=True, fmt="+.1f",
                                      unit=f" {PTS}"))  # fmt: skip
        fig.add_hline(y=0, line={"color": "#999", "width": 1})
    _x_axis(fig, positions)
    fig.update_yaxes(title_text=PENALTY_AXIS)
    fig.update_layout(meta={"csv_value": PENALTY_COLUMN})
    if base is None or stitched is None:
        add_note(fig, "add the accuracy metric to the sweep to see its penalty")
    elif not done:
        add_note(fig, WAITING if positions else "no positions yet")
    return mark_worse_side(house_style(fig, title))


def penalty_lines(lines: Sequence[Mapping[str, Any]], *, title: str | None = None) -> go.Figure:
    """Stitching penalty (B − stitched, in points, higher = worse) of several sweeps along one cut axis.

    ``lines``: dicts with ``title``, ``positions`` (the cuts the sweep visits), ``penalty`` (one stored
    fraction per finished position, in order, as :func:`~stitchcore.experiments.sweep.penalty_along` reads
    them), optionally ``penalty_ci`` (each one's paired 95% interval [lo, hi] or None: error bars) and
    ``reference`` (drawn dashed); the x axis is the longest ``positions``.  A line with no value yet
    is listed in the legend as waiting.

    >>> fig = penalty_lines([{"title": "s1 -> s0", "positions": ["fc1", "fc2"], "penalty": [0.01, 0.02]},
    ...                      {"title": "random -> s0", "positions": ["fc1", "fc2"], "penalty": [0.1],
    ...                       "reference": True}])
    >>> [(t.name, t.y, t.line.dash) for t in fig.data]
    [('s1 -> s0', (1.0, 2.0), 'solid'), ('random -> s0', (10.0,), 'dash')]
    """
    positions = list(max((ln.get("positions") or [] for ln in lines), key=len, default=[]))
    fig = go.Figure()
    for i, ln in enumerate(lines):
        values = [penalty_pts(v) for v in clean(ln.get("penalty") or [])]
        spans = _penalty_spans(ln.get("penalty_ci"), len(values))
        color = RUN_COLORS[i % len(RUN_COLORS)]
        fig.add_trace(go.Scatter(
            x=list(range(len(values))), y=values, mode="lines+markers",
            error_y=error_bars(values, spans, color=color, width=4),
            name=str(ln["title"]) + ("" if values else " (waiting)"),
            line={"color": color, "width": 2.5 if not ln.get("reference") else 2,
                  "dash": "dash" if ln.get("reference") else "solid"},
            marker={"size": 8 if not ln.get("reference") else 6, "color": color},
            customdata=_span_words(positions[: len(values)], spans),
            hovertemplate=f"{ln['title']}<br>cut %{{customdata}}: penalty %{{y:+.1f}} {PTS}<extra></extra>",
        ))  # fmt: skip
    fig.add_hline(y=0, line={"color": "#999", "width": 1})
    _x_axis(fig, positions)
    fig.update_yaxes(title_text=PENALTY_AXIS)
    fig.update_layout(meta={"csv_value": PENALTY_COLUMN})
    if not any(ln.get("penalty") for ln in lines):
        add_note(fig, WAITING if positions else "no positions yet")
    fig = house_style(fig, title)
    labels = [t.name for t in fig.data]
    if not legend_fits_on_top(labels, title):  # many sweeps' titles: under the plot, never over the title
        legend_below(fig, labels)
    return mark_worse_side(fig)
