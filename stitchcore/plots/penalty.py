"""Which way is worse: the one colour and word convention of every penalty figure.

Each paper keeps its own formula in the stored numbers, so the sign of "worse" differs:

* image stitching (Bansal et al.): penalty = B's accuracy − stitched accuracy, **higher = worse**;
* language models (the GPT-2 report): loss penalty = (L_base − L) / L_base, **lower = worse**;
* debiased accuracy (Hernandez et al.): trained − control, **higher = better** (the trained
  bottom adds more than the adapter alone).

Every page says so in words (:func:`penalty_words`, :func:`penalty_label`) and colours the same
way: WORSE = RED, BETTER = BLUE, a light neutral at 0 (:func:`penalty_colorscale`).  Line plots
mark the two directions beside the y axis (:func:`mark_worse_side`).

>>> penalty_words(True)
'higher = worse'
>>> penalty_label("penalty", "B − stitched", higher_is_worse=True)
'penalty = B − stitched (higher = worse)'
>>> penalty_colorscale(higher_is_worse=True)[-1][1] == WORSE_COLOR
True
>>> penalty_colorscale(higher_is_worse=False)[0][1] == WORSE_COLOR
True
"""

from __future__ import annotations

import plotly.graph_objects as go

__all__ = [
    "BETTER_COLOR", "IMAGE_PENALTY", "LM_PENALTY", "NEUTRAL_COLOR", "WORSE_COLOR", "mark_worse_side",
    "penalty_colorscale", "penalty_label", "penalty_words", "worse_end",
]  # fmt: skip

WORSE_COLOR = "#B2182B"  # ColorBrewer RdBu ends: red = worse, blue = better (colour-blind distinguishable)
BETTER_COLOR = "#2166AC"
NEUTRAL_COLOR = "#F7F7F7"  # 0: as good as the reference
_RAMP = ("#EF8A62", "#FDDBC7", "#D1E5F0", "#67A9CF")  # the steps between red and blue, red side first

_WORDS_MARGIN = 78  # px right of the plot area for "▲ better" at 12 px
IMAGE_PENALTY = "B − stitched"  # the image formula, in words (accuracy of B minus the stitched accuracy)
LM_PENALTY = "(L_base − L) / L_base"  # the GPT-2 report's loss penalty


def penalty_words(higher_is_worse: bool) -> str:
    """The words that say which way is worse: ``"higher = worse"`` or ``"lower = worse"``.

    >>> penalty_words(False)
    'lower = worse'
    """
    return "higher = worse" if higher_is_worse else "lower = worse"


def penalty_label(name: str, formula: str | None = None, *, higher_is_worse: bool) -> str:
    """An axis / colour-bar / column title with the formula and the direction.

    >>> penalty_label("penalty", IMAGE_PENALTY, higher_is_worse=True)
    'penalty = B − stitched (higher = worse)'
    >>> penalty_label("loss penalty", LM_PENALTY, higher_is_worse=False)
    'loss penalty = (L_base − L) / L_base (lower = worse)'
    """
    return f"{name}{f' = {formula}' if formula else ''} ({penalty_words(higher_is_worse)})"


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


def mark_worse_side(fig: go.Figure, higher_is_worse: bool) -> go.Figure:
    """Words right of a penalty line plot, clear of its lines: "▲ worse" in red level with the top of the
    plot and "▼ better" in blue level with its bottom (or the other way round), the colours of the heat
    maps.  Call it after :func:`~stitchcore.plots._style.house_style` (it widens the right margin); returns ``fig``.

    >>> [a.text for a in mark_worse_side(go.Figure(), higher_is_worse=False).layout.annotations]
    ['▲ better', '▼ worse']
    """
    top, bottom = (("worse", WORSE_COLOR), ("better", BETTER_COLOR))[:: 1 if higher_is_worse else -1]
    for y, (word, color), arrow, anchor in ((1.0, top, "▲", "top"), (0.0, bottom, "▼", "bottom")):
        fig.add_annotation(text=f"{arrow} {word}", xref="paper", yref="paper", x=1.0, y=y, xanchor="left",
                           yanchor=anchor, xshift=6, showarrow=False, font={"size": 12, "color": color},
                           name=f"penalty-{word}")  # fmt: skip
    fig.update_layout(margin={"r": max(fig.layout.margin.r or 0, _WORDS_MARGIN)})
    return fig
