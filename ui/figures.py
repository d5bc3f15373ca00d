"""Charts: the house toolbar (:data:`CHART_CONFIG`), a figure with its numbers as a CSV download
(:func:`chart`), live figures shared by every session that draws them (:func:`live_figure`), and a figure's
text held to plotly's harmless tags (:func:`shown_figure`: a bundle's cut name ``<a href=...>`` is no link)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go

from stitchcore.plots.safe_text import safe_figure
from stitchcore.report.figures import figure_csv
from ui.resources import POLL_SECONDS
from ui.text import plain, strip_tags

__all__ = ["CHART_CONFIG", "FIGURES_KEPT", "LIVE_CURVE_POINTS", "chart", "live_figure", "points_key", "shown_figure"]

LIVE_CURVE_POINTS = 400  # a live curve, redrawn each poll in every watching browser, draws at most this many points
# Every chart's toolbar: the camera saves a PNG at 3x the drawn size (print-ready); no plotly logo or cloud upload.
CHART_CONFIG = {"displaylogo": False, "showSendToCloud": False, "toImageButtonOptions": {"format": "png", "scale": 3}}

_FIGURES: OrderedDict[tuple, tuple[tuple, float, Any]] = OrderedDict()  # key -> (points key, built, figure)
_FIGURES_LOCK = threading.Lock()
FIGURES_KEPT = 64


def points_key(metrics: dict[str, list[tuple[int, float]]]) -> tuple:
    """What changes when a run logs a point: each series' name, length and last point.

    >>> points_key({"loss": [(1, 2.0), (2, 1.5)]})
    (('loss', 2, (2, 1.5)),)
    """
    return tuple((name, len(pts), tuple(pts[-1]) if pts else None) for name, pts in sorted(metrics.items()))


def live_figure(key: tuple, metrics: dict[str, list[tuple[int, float]]], build: Callable[[], Any], *,
                live: bool) -> Any:
    """The figure of ``key`` (("curve", run_id) ...), shared by every session that draws it.

    Built again only when ``metrics`` gained points and, while the run is ``live``, at most once per
    POLL_SECONDS: ten sessions polling a run that logs a hundred points a second share one figure a
    second instead of building ten.  A finished run's figure always has every point.  Figures are
    read-only once built; the newest FIGURES_KEPT are kept.
    """
    version, now = points_key(metrics), time.monotonic()
    with _FIGURES_LOCK:
        hit = _FIGURES.get(key)
        if hit is not None and (hit[0] == version or live and now - hit[1] < POLL_SECONDS):
            _FIGURES.move_to_end(key)
            return hit[2]
    figure = build()
    with _FIGURES_LOCK:
        _FIGURES[key] = (version, now, figure)
        _FIGURES.move_to_end(key)
        while len(_FIGURES) > FIGURES_KEPT:
            _FIGURES.popitem(last=False)
    return figure


def shown_figure(fig: go.Figure) -> go.Figure:
    """``fig`` as a page draws it: every text in it through :func:`stitchcore.plots.safe_text.plotly_text`,
    which keeps the house tags (``<br>``, ``<b>``, a styled span) and writes any other ``<`` as ``&lt;``, so a
    bundle's label ``<a href="http://host">`` shows as text, not a link (the offline report does the same).

    >>> shown_figure(go.Figure(go.Bar(x=["<a href='http://x'>y</a>"], y=[1]))).data[0].x
    ("&lt;a href='http://x'>y&lt;/a>",)
    """
    return safe_figure(fig)


def chart(where: Any, fig: Any, *, key: str, file_name: str | None = None) -> None:
    """A plotly figure with the house toolbar (:data:`CHART_CONFIG`), its text held to plotly's harmless tags
    (:func:`shown_figure`), and, given ``file_name``, a download of its numbers as CSV under it (``figure_csv``,
    made as it is drawn: see :func:`ui.downloads.made_download` for why)."""
    where.plotly_chart(shown_figure(fig), key=key, config=CHART_CONFIG)
    if file_name:
        title = strip_tags(fig.layout.title.text or "") or "figure"
        where.download_button(f"CSV: {plain(title)}", figure_csv(fig), file_name=file_name, mime="text/csv",
                              icon=":material/download:", key=f"{key}-csvdl", on_click="ignore")  # fmt: skip
