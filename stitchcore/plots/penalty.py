"""Which way is worse, and in what unit: the one convention of every penalty the app shows.

Stored numbers keep each paper's formula, unit and sign (run ids and old stores never change):

* image stitching (Bansal et al.): ``penalty`` = B's accuracy − stitched accuracy, a fraction, higher = worse;
* language models (the GPT-2 report): ``loss_penalty`` = (L_base − L) / L_base, a fraction, **lower** = worse;
* debiased accuracy (Hernandez et al.): trained − control accuracy, a fraction, higher = better.

Everything shown (figures, cards, tables, CSV downloads, reports) is converted here, at display time, to
one convention: **times 100, higher = worse**.

* the image penalty in percentage points, ``pts`` (:func:`penalty_pts`: 0.0067 -> 0.67, "+0.7 pts");
* the LM loss penalty in percent of the base model's loss, with the sign flipped so that higher = worse
  (:func:`loss_penalty_pct`: −0.25 -> +25.0, "+25.0 %": a loss 25% above the base's).  The GPT-2 report's
  own (L_base − L) / L_base is that number with the sign flipped, as a fraction (:data:`LM_PAPER_NOTE`);
* debiased accuracy stays a gain (higher = better), in points as well (:func:`penalty_pts`).

Axis, colour-bar and column titles carry the unit and the direction (:func:`penalty_label`,
:data:`PENALTY_AXIS`, :data:`LOSS_PENALTY_AXIS`); CSV columns name the unit (:data:`PENALTY_COLUMN`
``penalty_pts``, :data:`LOSS_PENALTY_COLUMN` ``loss_penalty_pct``).  Colour means worse or better only
on the diverging heat maps: worse = red, better = blue, a light neutral at 0 (:func:`penalty_colorscale`).
Line plots say the direction in words beside the y axis (:func:`mark_worse_side`), in a neutral grey: their
lines' colours only tell series apart.

>>> penalty_pts(0.006667), format_pts(penalty_pts(-0.04))
(0.6667, '−4.0 pts')
>>> loss_penalty_pct(-0.25), format_pct(loss_penalty_pct(-0.012898))
(25.0, '+1.3 %')
>>> PENALTY_AXIS
'penalty = B − stitched (pts, higher = worse)'
>>> penalty_colorscale(higher_is_worse=True)[-1][1] == WORSE_COLOR
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

__all__ = [
    "BETTER_COLOR", "DEBIASED_COLUMN", "IMAGE_PENALTY", "LM_PAPER_NOTE", "LM_PAPER_PENALTY", "LM_PENALTY",
    "LOSS_PENALTY_AXIS", "LOSS_PENALTY_COLUMN", "LOSS_PENALTY_UNIT", "NEUTRAL_COLOR", "PENALTY_AXIS",
    "PENALTY_COLUMN", "PTS", "WORDS_COLOR", "WORSE_COLOR", "format_pct", "format_pts", "grid_of", "interval_words",
    "loss_penalty_pct", "mark_worse_side", "penalty_colorscale", "penalty_label", "penalty_pts", "penalty_words",
    "worse_end",
]  # fmt: skip

WORSE_COLOR = "#B2182B"  # ColorBrewer RdBu ends: red = worse, blue = better (colour-blind distinguishable)
BETTER_COLOR = "#2166AC"
NEUTRAL_COLOR = "#F7F7F7"  # 0: as good as the reference
WORDS_COLOR = "#555555"  # "▲ worse" / "▼ better" beside a line plot: no colour claim about its lines
_RAMP = ("#EF8A62", "#FDDBC7", "#D1E5F0", "#67A9CF")  # the steps between red and blue, red side first

_WORDS_MARGIN = 78  # px right of the plot area for "▲ better" at 12 px
PTS = "pts"  # percentage points: a difference of two accuracies, times 100
LOSS_PENALTY_UNIT = "% of base loss"  # a relative loss difference, times 100
IMAGE_PENALTY = "B − stitched"  # the image formula, in words (accuracy of B minus the stitched accuracy)
LM_PENALTY = "(L − L_base) / L_base"  # the LM loss penalty as shown: higher = a higher loss than the base
LM_PAPER_PENALTY = "(L_base − L) / L_base"  # the GPT-2 report's loss penalty, as stored (lower = worse)
LM_PAPER_NOTE = (f"the GPT-2 report's loss penalty {LM_PAPER_PENALTY} is this with the sign flipped, as a fraction "
                 "(+25 % here = −0.25 there)")  # fmt: skip
PENALTY_COLUMN = "penalty_pts"  # CSV column of an image penalty
LOSS_PENALTY_COLUMN = "loss_penalty_pct"  # CSV column of an LM loss penalty
DEBIASED_COLUMN = "debiased_pts"  # CSV value of a debiased matrix (trained − control, higher = better)


def _number(value: Any) -> float | None:
    """A finite float, else None (missing, NaN, not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def penalty_pts(fraction: Any) -> float | None:
    """A stored accuracy difference (a fraction: the image penalty, a debiased cell) in percentage points.

    Rounded to 8 decimals (stored fractions have 6), so 100 × 0.006667 reads 0.6667, not 0.6667000000000001.

    >>> penalty_pts(0.02), penalty_pts(None), penalty_pts(float("nan"))
    (2.0, None, None)
    """
    v = _number(fraction)
    return None if v is None else round(100.0 * v, 8)


def loss_penalty_pct(paper_value: Any) -> float | None:
    """A stored LM loss penalty ((L_base − L) / L_base, lower = worse) as shown: percent of the base model's
    loss, higher = worse (the sign flipped).

    >>> loss_penalty_pct(0.1), loss_penalty_pct(0.0)
    (-10.0, 0.0)
    """
    v = _number(paper_value)
    return None if v is None else round(-100.0 * v, 8) + 0.0  # + 0.0: never "-0.0"


def _signed(value: float) -> str:
    text = f"{value:+.1f}"
    return "+0.0" if text == "-0.0" else text.replace("-", "−")  # the minus sign plotly's d3 format writes too


def format_pts(pts: Any) -> str:
    """Points as every page writes them: sign, one decimal, "pts" (``+0.7 pts``); "—" for no value.

    >>> format_pts(0.6667), format_pts(-12.04), format_pts(None)
    ('+0.7 pts', '−12.0 pts', '—')
    """
    v = _number(pts)
    return "—" if v is None else f"{_signed(v)} {PTS}"


def interval_words(ci: Any, kind: str) -> str:
    """A stored 95% interval ``[lo, hi]`` as pages write it: ``kind`` "accuracy" (fractions: ``94.0–97.6%``; any
    rate, a trait metric's too), "penalty" (``+0.4 to +3.8 pts``), "loss" (nats: ``2.013–2.105``) or
    "loss_penalty" (a stored (L_base − L) / L_base, shown as every page shows it: % of the base loss, higher =
    worse, so its ends swap: ``+1.2 to +4.0 %``); "" where the run stored none (runs from before intervals).

    >>> interval_words([0.94, 0.975556], "accuracy"), interval_words([-0.004, 0.0378], "penalty")
    ('94.0–97.6%', '−0.4 to +3.8 pts')
    >>> interval_words([2.01321, 2.1049], "loss"), interval_words([-0.04, -0.012], "loss_penalty")
    ('2.013–2.105', '+1.2 to +4.0 %')
    >>> interval_words(None, "accuracy")
    ''
    """
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or any(_number(v) is None for v in ci):
        return ""
    if kind == "loss":
        return f"{float(ci[0]):.3f}–{float(ci[1]):.3f}"
    if kind == "loss_penalty":
        lo, hi = sorted(loss_penalty_pct(v) for v in ci)
        return f"{_signed(lo)} to {_signed(hi)} %"
    lo, hi = (100.0 * float(v) for v in ci)
    if kind == "penalty":
        return f"{_signed(lo)} to {_signed(hi)} {PTS}"
    return f"{lo:.1f}–{hi:.1f}%"


def format_pct(pct: Any) -> str:
    """An LM loss penalty in percent as every page writes it (``+25.0 %``); "—" for no value."""
    v = _number(pct)
    return "—" if v is None else f"{_signed(v)} %"


def grid_of(values: Sequence[Sequence[Any]], convert: Any) -> list[list[float | None]]:
    """A heat map's grid converted cell by cell (``penalty_pts`` ...); missing cells stay None.

    >>> grid_of([[0.5, None]], penalty_pts)
    [[50.0, None]]
    """
    return [[convert(v) for v in row] for row in values]


def penalty_words(higher_is_worse: bool) -> str:
    """The words that say which way is worse: ``"higher = worse"`` or ``"lower = worse"``.

    >>> penalty_words(False)
    'lower = worse'
    """
    return "higher = worse" if higher_is_worse else "lower = worse"


def penalty_label(name: str, formula: str | None = None, *, unit: str | None = PTS,
                  higher_is_worse: bool = True) -> str:  # fmt: skip
    """An axis / colour-bar / column title with the formula, the unit and the direction.

    >>> penalty_label("loss penalty", LM_PENALTY, unit=LOSS_PENALTY_UNIT)
    'loss penalty = (L − L_base) / L_base (% of base loss, higher = worse)'
    >>> penalty_label("Δ accuracy", unit=PTS, higher_is_worse=False)
    'Δ accuracy (pts, lower = worse)'
    """
    how = ", ".join(w for w in (unit, penalty_words(higher_is_worse)) if w)
    return f"{name}{f' = {formula}' if formula else ''} ({how})"


PENALTY_AXIS = penalty_label("penalty", IMAGE_PENALTY)  # "penalty = B − stitched (pts, higher = worse)"
LOSS_PENALTY_AXIS = penalty_label("loss penalty", LM_PENALTY, unit=LOSS_PENALTY_UNIT)


def penalty_colorscale(higher_is_worse: bool) -> list[list[float | str]]:
    """A diverging plotly colour scale with the worse end red and the better end blue (centre it at 0).

    >>> [c for _, c in penalty_colorscale(True)][::3]
    ['#2166AC', '#F7F7F7', '#B2182B']
    """
    red_to_blue = [WORSE_COLOR, *_RAMP[:2], NEUTRAL_COLOR, *_RAMP[2:], BETTER_COLOR]
    colors = red_to_blue[::-1] if higher_is_worse else red_to_blue
    return [[i / (len(colors) - 1), c] for i, c in enumerate(colors)]


def worse_end(colorscale: list[list[float | str]] | tuple) -> str:
    """The colour at the worse end of a scale from :func:`penalty_colorscale` (for tests and legends).

    >>> worse_end(penalty_colorscale(False))
    '#B2182B'
    """
    ends = {colorscale[0][1], colorscale[-1][1]}
    if WORSE_COLOR not in ends:
        raise ValueError("not a penalty colour scale: neither end is WORSE_COLOR")
    return WORSE_COLOR


def mark_worse_side(fig: go.Figure, higher_is_worse: bool = True) -> go.Figure:
    """Words right of a penalty line plot, clear of its lines: "▲ worse" level with the top of the plot and
    "▼ better" level with its bottom (or the other way round), in a neutral grey (a line plot's colours tell
    its series apart, nothing else).  Call it after :func:`~stitchcore.plots._style.house_style` (it widens
    the right margin); returns ``fig``.

    >>> [a.text for a in mark_worse_side(go.Figure(), higher_is_worse=False).layout.annotations]
    ['▲ better', '▼ worse']
    """
    top, bottom = ("worse", "better")[:: 1 if higher_is_worse else -1]
    for y, word, arrow, anchor in ((1.0, top, "▲", "top"), (0.0, bottom, "▼", "bottom")):
        fig.add_annotation(text=f"{arrow} {word}", xref="paper", yref="paper", x=1.0, y=y, xanchor="left",
                           yanchor=anchor, xshift=6, showarrow=False, font={"size": 12, "color": WORDS_COLOR},
                           name=f"penalty-{word}")  # fmt: skip
    fig.update_layout(margin={"r": max(fig.layout.margin.r or 0, _WORDS_MARGIN)})
    return fig
