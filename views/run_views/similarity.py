"""A similarity run's view (CKA, RSA, ...): its calibrated map, or its raw maps, once done.

The maps and their notes come from ``views.similarity_maps``; each panel is drawn with its CSV download.
"""

from __future__ import annotations

import streamlit as st

import ui
from stitchcore.store.results import RunRecord
from views import similarity_maps
from views.run_views._shared import _draw

__all__ = ["similarity_view"]


def similarity_view(rec: RunRecord, *, key: str) -> None:
    """A similarity (CKA, RSA, ...) run on its own, once done: its calibrated map (against random-init Bs), or its
    raw maps (the values, the shuffled-input baseline, the untrained Bs, the dependence test): ``similarity_maps``."""
    def body(now) -> None:
        if now.state != "done" or not now.summary:
            return
        panels = similarity_maps.panels(now.summary, key)
        cols = st.columns(min(len(panels), 2))
        for i, panel in enumerate(panels):
            _draw(panel, cols[i % len(cols)], key=f"{key}-cka", run_id=rec.id)
        similarity_maps.notes(now.summary)

    ui.live_run(rec.id, key, body)
