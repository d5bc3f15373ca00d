"""A matrix run's view: its stitching heat map, the similarity run beside it, and each control.

The maps fill in cell by cell while the run is active (one ``MatrixState`` from ``matrix_state``); skipped and
pending cells are marked.  Once done, a click on a cell of the stitching panel (or the two pickers under it)
opens that pair on the Stitch page, and "Train these first" ranks the cells without training (``recommend``).
"""

from __future__ import annotations

import streamlit as st

import ui
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.matrix import MatrixSpec, matrix_state, similarity_beside
from stitchcore.experiments.matrix.recommend import (RANKING_HELP, RANKING_WORDS, RECOMMEND_WORDS, TOP, cell_words,
                                                     ranking_choices, recommend)
from stitchcore.experiments.stitch_fields import ADAPTER_KEYS
from stitchcore.params import link_params
from stitchcore.plots import heatmap as plots_heatmap
from stitchcore.report.figures import MEASURE_TITLES, control_panels, stitching_panel
from stitchcore.store.results import RunRecord
from views import similarity_maps
from views.run_views._shared import _draw

__all__ = ["METRIC_WORDS", "matrix_view"]


# the stitching panel's choices (MatrixState.metrics) in words
METRIC_WORDS = {"accuracy": "accuracy", "penalty": "penalty", "r2": "held-out R² (fit)", "cka": "CKA (fit)"}


def matrix_view(rec: RunRecord, *, key: str, cka_id: str | None = None) -> None:
    """A matrix run's heat maps: stitching accuracy or penalty (the similarity run ``cka_id`` beside it), then
    each control (random sender, random receiver, both random) beside its debiased matrix, filling in cell by
    cell while it runs; skipped pairs are marked in every map, and each map downloads as CSV.  A click on a
    cell of the stitching panel (or the two pickers below) opens that pair on the Stitch page."""
    runner = ui.get_runner()
    spec = spec_from_record(rec)
    linked = ui.get_store().lookup(cka_id) if cka_id is not None else None
    if cka_id is not None and (linked is None or linked.kind != "similarity"):  # a link's cka= names no such run
        st.warning(f"The link's similarity run {ui.code_span(cka_id, 80)} is not a similarity run in this store: "
                   "showing the one "
                   "launched beside this matrix, if any.", icon=":material/warning:")  # fmt: skip
        cka_id = None
    beside = similarity_beside(ui.get_store(), spec, rec.created) if cka_id is None else linked
    if cka_id is None and beside is not None:  # opened from Results or a plain link: the one launched with it
        cka_id = beside.id
    measure_name = MEASURE_TITLES.get(beside.spec.get("measure"), "Similarity") if beside else "Similarity"

    def body(now) -> None:
        cka_now = runner.get(cka_id) if cka_id else None
        state = matrix_state(ui.get_store(), rec.id, now.summary, spec, status=now.state, final=now.is_final,
                             cut_names=lambda ref: [c.name for c in ui.cuts_of(ref)])  # the full grid from the start
        if not state.senders:
            st.caption("Waiting for the first cells…")
            return
        senders, receivers, skipped, pending = state.senders, state.receivers, state.skipped, state.pending
        metric = st.radio("Stitching panel shows", state.metrics, horizontal=True, key=f"{key}_metric",
                          format_func=METRIC_WORDS.get,
                          help="penalty = B's accuracy − stitched accuracy (Bansal et al.) in percentage points: "
                               "higher = worse; on its heat map red = worse, blue = better. Held-out R² and CKA "
                               "come from each cell's least-squares fit, before any training (every pixel of B's "
                               "grid a sample; R² on the fifth of the training images the fit did not see)")  # fmt: skip
        across = bool(state.across_seeds) and st.toggle(
            f"Mean over the {ui.plain(state.across_seeds['n'])} adapter seeds", value=True, key=f"{key}_across",
            help="on: each cell is the mean over its adapters trained from every seed, its interval the 95% "
                 "t-interval across them (what training adds); off: the first seed's adapter, its interval over "
                 "the test images (the stitch a cell click opens)") if state.across_seeds else False  # fmt: skip
        top = [stitching_panel(state.grid(metric, across), senders, receivers, metric, state.intervals(metric, across),
                               seeds=state.across_seeds["n"] if across else None)]  # fmt: skip
        if cka_now is not None and cka_now.summary:
            top += similarity_maps.panels(cka_now.summary, key)  # calibrated first, or raw
        elif cka_now is not None:
            st.caption(ui.plain(f"{measure_name}: {cka_now.state} {cka_now.message}"))
        done = now.state == "done"
        if done and not ui.student_view():
            st.caption("Click a cell of the stitching panel to open that pair on the Stitch page.")
        _legend(skipped, pending)
        cols = st.columns(min(len(top), 2))
        for i, panel in enumerate(top):
            opens = panel.opens and done and not ui.student_view()  # a lesson's student stays in the lesson
            event = _draw(panel, cols[i % len(cols)], key=f"{key}-{metric}", run_id=rec.id, skipped=skipped,
                          pending=pending, select=opens)  # fmt: skip
            if opens:
                _open_selected_cell(spec, event)
        if state.controls:
            st.subheader("Controls and debiased matrices")
            st.caption("Each control stitches the same cuts with random-init weights on one side or both "
                       "(Hernandez et al.); beside it, debiased = trained accuracy − the control's, cell by cell, "
                       "in percentage points: higher = the trained network adds more than the control (blue), "
                       "below 0 = worse than the control (red). A ring ○ marks a cell whose 95% interval "
                       "overlaps the control's: there the trained network is not distinguishable from it.")  # fmt: skip
        for table in state.controls:  # each says, beside its panels, whether it can differ from chance
            if table.note:
                rings = (f" {len(table.overlap)} cell(s) ringed: their 95% intervals overlap this control's."
                         if table.overlap else "")
                (st.caption if table.can_differ else st.warning)(
                    f"**Control: {ui.plain(table.name)}.** {ui.plain(table.note)}{rings}")
            pair = control_panels(table, senders, receivers)
            cols = st.columns(2) if pair else []
            for col, panel in zip(cols[-len(pair):], pair, strict=True):  # a lone debiased panel sits right
                _draw(panel, col, key=key, run_id=rec.id, skipped=skipped, pending=pending)
        if state.skipped_listed:
            with st.expander(f"{len(state.skipped_listed)} pair(s) skipped"):
                for pair_name, why in state.skipped_listed.items():
                    st.markdown(f"- {ui.code_span(pair_name)}: {ui.plain(why)}")
        if done and not ui.student_view():  # links to other pages: not in a lesson's student view
            _train_first(now.summary or {}, spec, key)
            _open_in_stitch(spec, senders, receivers, key)

    ui.live_run(rec.id, key, body, also=(cka_id,),  # until the matrix and the CKA beside it have both ended
                also_cancel=(cka_id,),  # Stop cancels the CKA beside it too
                kept="Finished cells are kept below, and a re-launch resumes from them.")


def _legend(skipped: dict, pending: str | None) -> None:
    """What the marks in the heat maps mean (only those that can appear now)."""
    parts = []
    if skipped:
        parts.append(f"grey {plots_heatmap.SKIPPED_MARK} = pair skipped, no adapter joins these cuts (hover: why)")
    if pending:
        parts.append(f"white {plots_heatmap.PENDING_MARK} = {pending}")
    if parts:
        st.caption("In the heat maps: " + "; ".join(parts) + ".")


def _stitch_params(spec: MatrixSpec, sender: str, receiver: str) -> dict[str, str]:
    """Stitch-page query parameters for one cell (the page pre-fills its form from them): the cell's stitch."""
    return link_params("stitch", spec.cell_stitch(sender, receiver), explicit=ADAPTER_KEYS)


def _open_selected_cell(spec: MatrixSpec, event) -> None:
    """A click on a cell of the stitching panel opens that pair on the Stitch page."""
    for point in (event.selection.points if event is not None else []):
        cell = plots_heatmap.cell_of_point(point)
        if cell is not None:
            st.switch_page(ui.page_file("stitch"), query_params=_stitch_params(spec, *cell))


def _train_first(summary: dict, spec: MatrixSpec, key: str) -> None:
    """"Train these first": the matrix's cells ranked by a score that needs no training (recommend.RANKINGS), the
    top ones each a link to train that stitch on the Stitch page."""
    choices = ranking_choices(summary)
    if not choices:
        return
    st.subheader("Train these first")
    st.caption(RECOMMEND_WORDS)
    by = st.radio("Rank the cut pairs by", choices, horizontal=True, key=f"{key}_rank_by",
                  format_func=RANKING_WORDS.get, help=RANKING_HELP)
    for k, cell in enumerate(recommend(summary, by=by, top=TOP), start=1):
        c = st.columns([4, 3])
        c[0].markdown(f"{k}. {ui.code_span(cell['sender'])} → {ui.code_span(cell['receiver'])}: "
                      f"{ui.plain(cell_words(cell))}")
        c[1].page_link(ui.page_file("stitch"), label="Train it on the Stitch page", icon=":material/cable:",
                       query_params=_stitch_params(spec, cell["sender"], cell["receiver"]))


def _open_in_stitch(spec: MatrixSpec, senders: list[str], receivers: list[str], key: str) -> None:
    """The keyboard way to open one cell as a full stitch (train the adapter, per-class accuracy ...)."""
    c = st.columns([2, 2, 3])
    sender = c[0].selectbox("Sender (A)", senders, key=f"{key}_cell_sender")
    receiver = c[1].selectbox("Receiver (B)", receivers, key=f"{key}_cell_receiver")
    c[2].page_link(ui.page_file("stitch"), label="Open this cell on the Stitch page",
                   query_params=_stitch_params(spec, sender, receiver), icon=":material/cable:")
