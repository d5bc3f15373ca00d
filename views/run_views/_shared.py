"""What the heat-map views share: :func:`_draw`, one heat-map panel of ``stitchcore.report.figures`` (the
similarity and matrix views) with its numbers as a CSV download.  (Each view's header, live redraw and
downloads are ``ui.live_run``.)
"""

from __future__ import annotations

from typing import Any

import ui
from stitchcore.report.figures import HeatPanel, panel_figure
from ui.text import strip_tags


def _draw(panel: HeatPanel, where: Any, *, key: str, run_id: str, skipped: dict | None = None,
          pending: str | None = None, select: bool = False) -> Any:  # fmt: skip
    """One panel in ``where``: the heat map, then its numbers as a CSV download; returns the chart's event."""
    fig = ui.shown_figure(panel_figure(panel, skipped=skipped, pending=pending))  # a bundle's cut names are text
    chart_key = f"{key}-heat-{panel.csv_name}-{run_id}"
    if select:
        event = where.plotly_chart(fig, key=chart_key, on_select="rerun", selection_mode="points",
                                   config=ui.CHART_CONFIG)  # fmt: skip
    else:
        event = where.plotly_chart(fig, key=chart_key, config=ui.CHART_CONFIG)
    where.download_button(
        f"CSV: {ui.plain(strip_tags(panel.title))}", panel.csv(), file_name=f"{run_id}-{panel.csv_name}.csv",
        mime="text/csv",
        icon=":material/download:", key=f"{key}-csv-{panel.csv_name}-{run_id}", on_click="ignore",
    )  # fmt: skip
    return event
