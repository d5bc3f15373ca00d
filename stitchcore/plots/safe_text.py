"""Text inside a figure held to plotly's harmless markup: a run label from a bundle that reads
``<a href="http://host">`` is drawn as text, never as a link, in the app and in the offline report.

>>> import plotly.graph_objects as go
>>> safe_figure(go.Figure(go.Bar(x=["<a href='http://x'>y</a>"], y=[1]))).data[0].x
("&lt;a href='http://x'>y&lt;/a>",)
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import plotly.graph_objects as go

__all__ = ["plotly_text", "safe_figure"]

# plotly's own markup the house figures use: <br>, <b>, <i>, <sup>, <sub>, <extra>, a span with a style; every
# other "<" (<a href=...> would be a link, <img> is not drawn but is not ours either) is written as &lt;,
# which plotly shows as "<"
_PLOTLY_TAG = re.compile(r"<(?!/?(?:b|i|em|sup|sub|extra|span)>|br\s*/?>|span style='[^'<>]*'>)")


def plotly_text(text: str) -> str:
    """``text`` for a plotly title, tick label or hover: the house tags kept, any other ``<`` as ``&lt;``.

    >>> plotly_text("x<a href='http://evil'>y</a><br><b>z</b>")
    "x&lt;a href='http://evil'>y&lt;/a><br><b>z</b>"
    """
    return _PLOTLY_TAG.sub("&lt;", text)


def safe_figure(fig: go.Figure) -> go.Figure:
    """``fig`` with every text in it (titles, tick labels, names, hovers, annotations) through
    :func:`plotly_text`; a new figure only where something changed (``fig`` itself otherwise).

    >>> f = go.Figure(layout_title_text="CKA<br><b>ok</b>"); safe_figure(f) is f
    True
    """
    changed = False

    def held(value: Any) -> Any:
        nonlocal changed
        if isinstance(value, str):
            out = plotly_text(value)
            changed |= out != value
            return out
        if isinstance(value, dict):
            return {k: held(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [held(v) for v in value]
        if isinstance(value, np.ndarray) and value.dtype.kind in "OUS":  # text arrays (categories, hover text)
            return np.array([held(v) for v in value.ravel().tolist()], dtype=object).reshape(value.shape)
        return value

    out = held(fig.to_plotly_json())
    return go.Figure(out) if changed else fig
