"""What every kind's view shares: its downloads once the run has ended, and a heat-map panel drawn.

Each view draws its run in a fragment that redraws while the run is active (``ui.live_while_running``), then
:func:`_downloads` under it (``ui.run_downloads``: metrics CSV, JSON, "Download bundle" as ``runs export``,
"Download report" as ``runs report``).  :func:`_draw` is one heat-map panel of ``stitchcore.report.figures``
(the similarity and matrix views) with its numbers as a CSV download.
"""

from __future__ import annotations

from typing import Any

import ui
from stitchcore.report.figures import HeatPanel, panel_figure
from stitchcore.store.results import RunRecord
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


def _downloads(rec: RunRecord, key: str) -> None:
    """The run's downloads (metrics CSV, JSON, bundle, report: ``ui.run_downloads``) once it has ended."""
    snap = ui.get_runner().get(rec.id)
    if snap is not None and snap.is_final:
        ui.run_downloads(snap, key)
