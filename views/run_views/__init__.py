"""Each run kind's own view, drawn from its stored record: one module per kind, one implementation each.

Not a page (app.py routes the pages of ``ui.nav.PAGES``): the page that makes a kind (Similarity for matrix and
similarity runs, Traits for sweeps, Language models for merge / lmstitch / lmdepth) and Results both call
these, with their own ``key`` prefix so widgets never collide.  :data:`VIEWS` holds the view of every
registered kind (tests/test_kinds.py checks it); stitch and zoo runs are ``ui.run_view`` with their result
card (:data:`CARDS`), which the Stitch and Models pages pass to it too.
Stored results are read only through the experiment modules' readers (``matrix_state``,
``partial_positions``, ``partial_points``, ``spec_from_record``) and drawn with ``stitchcore.plots``.
Every view is ``ui.live_run``: its header and a body that redraw while the run is active, with
its downloads under it once the run has ended (``ui.run_downloads``: metrics CSV, JSON, "Download bundle"
as ``runs export``, "Download report" as ``runs report``).  The heat-map panels and the report share
``stitchcore.report.figures``.

The views live by kind: :mod:`.cards` (stitch and zoo), :mod:`.similarity`, :mod:`.matrix`, :mod:`.assemble`,
:mod:`.sweep` and :mod:`.lm` (merge, lmstitch, lmdepth), the heat-map views over :mod:`._shared` (a heat-map
panel); this package re-exports their views and holds what spans every kind (:data:`VIEWS`,
:func:`run_panel`, :func:`open_on_page`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

import ui
from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.matrix import similarity_beside
from stitchcore.store.results import RunRecord
from views.run_views.assemble import assemble_view
from views.run_views.cards import CARDS, card_view, stitch_card, zoo_card
from views.run_views.lm import lm_view
from views.run_views.matrix import matrix_view
from views.run_views.similarity import similarity_view
from views.run_views.sweep import sweep_view
from views.run_views.transfer import transfer_view

__all__ = [
    "CARDS",
    "VIEWS",
    "assemble_view",
    "card_view",
    "lm_view",
    "matrix_view",
    "open_on_page",
    "run_panel",
    "similarity_view",
    "stitch_card",
    "sweep_view",
    "transfer_view",
    "zoo_card",
]


# Each run kind's view, ``view(rec, key=...)``; one entry per registered kind (tests/test_kinds.py checks it
# against list_experiments()).  Results opens any run through it (run_panel).
VIEWS: dict[str, Callable[..., None]] = {
    "assemble": assemble_view,
    "lmdepth": lm_view,
    "lmstitch": lm_view,
    "matrix": matrix_view,
    "merge": lm_view,
    "similarity": similarity_view,
    "stitch": card_view,
    "sweep": sweep_view,
    "transfer": transfer_view,
    "zoo": card_view,
}


def open_on_page(rec: RunRecord, container: Any = st) -> None:
    """A link to the page that makes runs of this kind, opened on this run (``similarity?run=ID``; a matrix
    with the similarity run launched beside it, ``&cka=ID``, so the page shows that measure)."""
    page = ui.PAGE_FOR_KIND.get(rec.kind)
    if page is None:
        return
    query = {"run": rec.id}
    if rec.kind == "matrix":
        beside = similarity_beside(ui.get_store(), spec_from_record(rec), rec.created)
        if beside is not None:
            query["cka"] = beside.id
    container.page_link(ui.page_file(page), label=f"Open on the {ui.PAGE_TITLES[page]} page",
                        query_params=query, icon=":material/open_in_new:")


def run_panel(rec: RunRecord, *, key: str) -> None:
    """Any run in its kind's own view (:data:`VIEWS`), with its downloads once it has ended; a kind this
    version does not know shows as ``ui.run_view`` does any run (header, curves, downloads)."""
    view = VIEWS.get(rec.kind, card_view)
    try:
        view(rec, key=key)
    except StitchError as exc:  # e.g. a record whose spec this version cannot read
        ui.show_error(exc)
    except Exception as exc:  # noqa: BLE001 - a record no reader expected: one red line, the traceback in the log
        ui.show_error(exc, f"drawing run {rec.id}")
