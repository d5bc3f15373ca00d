"""Each run kind's own view, drawn from its stored record: one implementation per kind.

Not a page (app.py routes the pages of ``ui.nav.PAGES``): the page that makes a kind (Similarity for matrix and
similarity runs, Traits for sweeps, Language models for merge / lmstitch / lmdepth) and Results both call
these, with their own ``key`` prefix so widgets never collide.  :data:`VIEWS` holds the view of every
registered kind (tests/test_kinds.py checks it); stitch and zoo runs are ``ui.run_view`` with their result
card (:data:`CARDS`), which the Stitch and Models pages pass to it too.
Stored results are read only through the experiment modules' readers (``matrix_state``,
``partial_positions``, ``partial_points``, ``spec_from_record``) and drawn with ``stitchcore.plots``.
Every view is a fragment that redraws while its run is active (``ui.live_while_running``), with
its downloads under it once the run has ended (``ui.run_downloads``: metrics CSV, JSON, "Download bundle"
as ``runs export``, "Download report" as ``runs report``).  The heat-map panels and the report share
``stitchcore.report.figures``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import streamlit as st

import ui
from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.assemble import AssembleSpec, assembled_cells, pareto_front, recipe_name
from stitchcore.experiments.lm import labelled_points, partial_points
from stitchcore.experiments.matrix import MatrixSpec, matrix_state, similarity_beside
from stitchcore.experiments.matrix.recommend import RANKING_WORDS, TOP, cell_words, ranking_choices, recommend
from stitchcore.experiments.stitch import noise_sender_words as stitch_noise_words
from stitchcore.experiments.sweep import noise_sender_words, partial_positions
from stitchcore.measures.intervals import seed_note
from stitchcore.measures.meaning import colorbar_title, explain
from stitchcore.measures.traits import parse_metric
from stitchcore.plots import assemble as plots_assemble
from stitchcore.plots import heatmap as plots_heatmap
from stitchcore.plots import lm as plots_lm
from stitchcore.plots import runs as plots
from stitchcore.plots import traits as plots_traits
from stitchcore.plots.penalty import (
    LM_PAPER_NOTE,
    format_pct,
    format_pts,
    interval_words,
    loss_penalty_pct,
    penalty_pts,
)
from stitchcore.report.figures import (
    MEASURE_TITLES,
    PENALTY_WORDS,
    HeatPanel,
    control_panels,
    panel_figure,
    stitching_panel,
)  # fmt: skip
from stitchcore.stitching.adapters import NO_DOWNSAMPLE
from stitchcore.store.results import RunRecord
from stitchcore.timewords import duration_words
from ui.text import strip_tags
from views import similarity_maps

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
    "zoo_card",
]

# ------------------------------------------------------------------------------------------ stitch / zoo


def stitch_card(s: dict[str, Any], key: str) -> None:
    """A done stitch's numbers: accuracies (the noise sender's beside the stitched one, where the run has it),
    penalty, time, the adapter, then accuracy and per-class bars."""
    base_role = s.get("penalty_base", "b").upper()
    noise = (s.get("controls") or {}).get("noise_sender") or {}
    first, *c = st.columns(6 if "accuracy" in noise else 5)
    first.metric("Stitched accuracy", f"{s['accuracy']:.1%}", help=explain("accuracy"))
    if "accuracy" in noise:  # runs stored before the noise sender, or that skipped it, have none
        c.pop(0).metric("Noise sender", f"{noise['accuracy']:.1%}",
                        delta=f"{format_pts(penalty_pts(-noise['margin']))} vs stitched", delta_color="off",
                        help="The same adapter and training from class-clustered noise of A's activation shape and "
                             "scale (it knows each image's label, nothing else): a stitch that does no better is "
                             "not evidence about A's layers. " + explain("accuracy"))  # fmt: skip
    c[0].metric("Model A", f"{s['base']['a']:.1%}", help="A's own test accuracy. " + explain("accuracy"))
    c[1].metric("Model B", f"{s['base']['b']:.1%}", help="B's own test accuracy. " + explain("accuracy"))
    c[2].metric(f"Penalty ({ui.plain(base_role)} − stitched)", format_pts(penalty_pts(s["penalty"])),
                help=explain("penalty"))
    c[3].metric("Time", duration_words(s.get("seconds")))
    if s.get("accuracy_ci"):  # runs stored before intervals have none
        base_ci = s.get("base_ci", {})
        st.caption(ui.plain(
            f"95% intervals over the {s.get('n_test', '?')} test images (exact for accuracies, paired bootstrap "
            f"for the penalty): stitched "
            f"{interval_words(s['accuracy_ci'], 'accuracy')} · A {interval_words(base_ci.get('a'), 'accuracy')} · "
            f"B {interval_words(base_ci.get('b'), 'accuracy')} · penalty {interval_words(s.get('penalty_ci'), 'penalty')}"
            f" (paired: {base_role} and the stitched model scored on the same images)"
        ))
    if s.get("seeds"):  # the spread over adapter trainings: training noise on top of the test images'
        sd = s["seeds"]
        st.caption(ui.plain(
            f"Across {len(sd['seed'])} seeds ({', '.join(map(str, sd['seed']))}; the numbers above are seed "
            f"{sd['seed'][0]}'s): stitched {sd['accuracy_mean']:.1%} ({interval_words(sd['accuracy_ci'], 'accuracy')}) "
            f"· penalty {format_pts(penalty_pts(sd['penalty_mean']))} ({interval_words(sd['penalty_ci'], 'penalty')})"
            + (f" · {seed_note(len(sd['seed']))}" if seed_note(len(sd["seed"])) else
               " · 95% Student-t intervals of the mean over seeds")
        ))
    noise_words = stitch_noise_words(s)
    if noise_words:
        st.caption(ui.plain(noise_words))
    if s.get("n_val") and "history" in s and not s["history"]:  # 0 epochs: the adapter's start, no curve
        st.caption("0 training epochs: the adapter is its start (e.g. the least-squares fit), never trained, so "
                   "there is no training curve")  # fmt: skip
    elif s.get("n_val"):
        kept = f" · kept the adapter of epoch {s['kept_epoch']} (best validation accuracy)" if "kept_epoch" in s else ""
        st.caption(f"{s['n_val']} training images held out as validation: the curve below is on them, the "
                   f"numbers above on the {s.get('n_test', '?')} test images{kept}")
    resid = s.get("lstsq_residual")
    st.caption(ui.plain(
        f"Adapter: {s['params']:,} parameters · {s['flops']:,} FLOPs per example"
        + (f" · lstsq residual {resid:.3f}" if resid is not None else "")
        + f" · A[{s['cut_a']['name']}] {tuple(s['cut_a']['shape'])} → B[{s['cut_b']['name']}]"
        f" {tuple(s['cut_b']['shape'])} · {s.get('n_train', '?')} train / {s.get('n_test', '?')} test images"
    ))  # a bundle's cut names are text
    left, right = st.columns(2)
    ui.chart(left, plots.accuracy_bars(s), key=f"{key}-acc", file_name="accuracy.csv")
    ui.chart(right, plots.per_class_bars(s), key=f"{key}-pc", file_name="per-class.csv")


def zoo_card(s: dict[str, Any], key: str) -> None:
    """A done zoo run's model: its ref, test accuracy, parameters and sparsity."""
    st.markdown(f"Model **{ui.code_span(s['ref'])}** ({ui.plain(s['arch'])} on {ui.plain(s['dataset'])})")
    c = st.columns(3)
    c[0].metric("Test accuracy", f"{s['accuracy']:.1%}", help=explain("accuracy"))
    c[1].metric("Parameters", f"{s['params']:,}")
    c[2].metric("Sparsity", f"{s.get('sparsity', 0.0):.0%}")


# The result cards ``ui.run_view`` draws under a done run's header (kind -> card); pages showing ``?run=`` pass it.
CARDS: dict[str, ui.Card] = {"stitch": stitch_card, "zoo": zoo_card}


def card_view(rec: RunRecord, *, key: str) -> None:
    """A stitch or zoo run: ``ui.run_view`` (header, progress, the card once done, the training curve, the
    downloads)."""
    ui.run_view(rec.id, key=key, cards=CARDS)


# ------------------------------------------------------------------------------------ similarity / matrix


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


def similarity_view(rec: RunRecord, *, key: str) -> None:
    """A similarity (CKA, RSA, ...) run on its own, once done: its calibrated map (against random-init Bs), or its
    raw maps (the values, the shuffled-input baseline, the untrained Bs, the dependence test): ``similarity_maps``."""
    runner = ui.get_runner()
    snap = runner.get(rec.id)

    @ui.live_while_running(rec.id)
    def live() -> None:
        now = runner.get(rec.id) or snap
        ui.run_header(now, key)
        if now.state != "done" or not now.summary:
            return
        panels = similarity_maps.panels(now.summary, key)
        cols = st.columns(min(len(panels), 2))
        for i, panel in enumerate(panels):
            _draw(panel, cols[i % len(cols)], key=f"{key}-cka", run_id=rec.id)
        similarity_maps.notes(now.summary)

    live()
    _downloads(rec, key)


# the stitching panel's choices (MatrixState.metrics) in words
METRIC_WORDS = {"accuracy": "accuracy", "penalty": "penalty", "r2": "held-out R² (fit)", "cka": "CKA (fit)"}


def matrix_view(rec: RunRecord, *, key: str, cka_id: str | None = None) -> None:
    """A matrix run's heat maps: stitching accuracy or penalty (the similarity run ``cka_id`` beside it), then
    each control (random sender, random receiver, both random) beside its debiased matrix, filling in cell by
    cell while it runs; skipped pairs are marked in every map, and each map downloads as CSV.  A click on a
    cell of the stitching panel (or the two pickers below) opens that pair on the Stitch page."""
    runner = ui.get_runner()
    snap = runner.get(rec.id)
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

    @ui.live_while_running(rec.id, cka_id)  # until the matrix and the CKA beside it have both ended
    def live() -> None:
        now = runner.get(rec.id) or snap
        cka_now = runner.get(cka_id) if cka_id else None
        ui.run_header(now, key, also_cancel=(cka_id,),  # Stop cancels the CKA beside it too
                      kept="Finished cells are kept below, and a re-launch resumes from them.")
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

    live()
    _downloads(rec, key)


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
    """Stitch-page query parameters for one cell (the page pre-fills its form from them); a matrix fits its cells
    on every train image, so the stitch holds out no validation split either; a matrix of several adapter seeds
    opens as a stitch of as many."""
    seeds = {"seeds": str(spec.seeds)} if spec.seeds > 1 else {}
    return {"a": spec.a, "b": spec.b, "cut_a": sender, "cut_b": receiver, "init": "lstsq", "val_fraction": "0.0",
            **seeds}


def _open_selected_cell(spec: MatrixSpec, event) -> None:
    """A click on a cell of the stitching panel opens that pair on the Stitch page."""
    for point in (event.selection.points if event is not None else []):
        cell = plots_heatmap.cell_of_point(point)
        if cell is not None:
            st.switch_page(ui.page_file("stitch"), query_params=_stitch_params(spec, *cell))


def _train_first(summary: dict, spec: MatrixSpec, key: str) -> None:
    """"Train these first": the matrix's cells ranked by a score that needs no training (its fits' held-out R²,
    CKA, or the closed-form accuracy), the top ones each a link to train that stitch on the Stitch page."""
    choices = ranking_choices(summary)
    if not choices:
        return
    st.subheader("Train these first")
    st.caption("Ranked without training, from each cell's least-squares fit: a guide to which pairs to train first, "
               "not a substitute for training (on five zoo pairs the held-out R² ranking had a Spearman ρ of 0.61 "
               "with the trained matrix, and held its best cell in the top 5 for four of them).")  # fmt: skip
    by = st.radio("Rank the cut pairs by", choices, horizontal=True, key=f"{key}_rank_by",
                  format_func=RANKING_WORDS.get,
                  help="computed without training any adapter: the least-squares fit's held-out R² (how much of B's "
                       "activation the linear map predicts on training images it did not see), the linear CKA of "
                       "the same samples, or the closed-form matrix's test accuracy. bench/matrix_scaling.py "
                       "measures how well each predicts a trained matrix.")  # fmt: skip
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


# ------------------------------------------------------------------------------------------------ assemble


def _assemble_stitch_params(spec: AssembleSpec, cell: dict) -> dict[str, str]:
    """Stitch-page query parameters for one assembled network: its cuts, adapter recipe and training."""
    return {"a": spec.a, "b": spec.b, "cut_a": cell["sender"], "cut_b": cell["receiver"], "kind": cell["adapter"],
            "norm": cell["norm"], "resample": cell["resample"], "init": "random", "optimizer": spec.optimizer,
            "lr": str(spec.lr), "epochs": str(spec.epochs), "batch_size": str(spec.batch_size),
            "val_fraction": "0.0",  # assemble trains on every train image
            **({"dataset": spec.dataset} if spec.dataset else {})}  # fmt: skip


def assemble_view(rec: RunRecord, *, key: str) -> None:
    """An assemble run: accuracy against FLOPs with the Pareto front and A and B (a click on a point opens that
    network on the Stitch page), a heat map per recipe over (sender, receiver), the recipes compared; filling in
    sender by sender while it runs."""
    runner = ui.get_runner()
    snap = runner.get(rec.id)
    spec = spec_from_record(rec)
    run_id = rec.id

    @ui.live_while_running(run_id)
    def live() -> None:
        now = runner.get(run_id) or snap
        ui.run_header(now, key, kept="Finished cells are kept below, and a re-launch resumes from them.")
        s = now.summary if now.state == "done" else None
        cells = s["cells"] if s else assembled_cells(ui.get_store(), run_id)
        if not cells:
            st.caption("Waiting for the first sender's cells…")
            return
        base = s["base"] if s else None
        front = pareto_front([*cells, *((base or {}).values())])
        fig = ui.shown_figure(plots_assemble.accuracy_vs_flops(cells, base, front))
        opens = not ui.student_view()  # a click opens the Stitch page: not from a lesson's student view
        event = st.plotly_chart(fig, key=f"{key}-pareto-{run_id}", on_select="rerun" if opens else "ignore",
                                selection_mode="points", config=ui.CHART_CONFIG)  # fmt: skip
        for point in (event.selection.points if opens and event is not None else []):
            index = point.get("customdata")
            if isinstance(index, list):
                index = index[0] if index else None
            if isinstance(index, int) and 0 <= index < len(cells):
                st.switch_page(ui.page_file("stitch"), query_params=_assemble_stitch_params(spec, cells[index]))
        no_front = plots_assemble.front_words(len(cells), base, front)
        front_text = (f". {no_front} " if no_front else
                      "; dotted = the Pareto front (no network is both more accurate and cheaper). ")  # fmt: skip
        chained = getattr(spec, "rescale", "oneshot") == "chained"
        st.caption("Each point is one assembled network: A up to the sender cut, an adapter, B from the receiver "
                   f"cut. Colour = adapter kind, shape = rescaling; stars = A and B alone{ui.plain(front_text)}"
                   "FLOPs count 2 per multiply-add (MACs, the paper's unit, are half; in the hover). "
                   + ("Gaps of more than 2x are bridged by one adapter per 2x step. " if chained else
                      "Gaps are bridged by one adapter resizing by the whole ratio (the reading before issue 25). ")
                   + "Click a point to open it on the Stitch page"
                   + (" (which resizes in one step and has no No Downsample: a near, not the same, network)."
                      if chained or NO_DOWNSAMPLE in spec.resamples else "."))  # fmt: skip
        recipes = s["recipes"] if s else [recipe_name(r) for r in spec.recipes()]
        senders = s["senders"] if s else list(dict.fromkeys(c["sender"] for c in cells))
        receivers = s["receivers"] if s else list(dict.fromkeys(c["receiver"] for c in cells))
        ui.chart(st, plots_assemble.recipe_comparison(cells, recipes), key=f"{key}-recipes-{run_id}",
                 file_name=f"{run_id}-recipes.csv" if s else None)  # fmt: skip
        st.subheader("Accuracy per recipe")
        cols = st.columns(2)
        for i, recipe in enumerate(recipes):
            ui.chart(cols[i % 2], plots_assemble.recipe_heatmap(cells, recipe, senders, receivers, pending=s is None,
                                                                     colorbar_title=colorbar_title("accuracy")),
                     key=f"{key}-heat-{i}-{run_id}", file_name=f"{run_id}-{recipe.replace('/', '-')}.csv" if s else None)
        copies = sum(bool(c.get("same_as")) for c in cells)
        skipped = [c for c in cells if c.get("skipped_reason")]
        if copies:
            st.caption(f"{copies} cell(s) build the same adapter as another recipe (no rescaling needed there) and "
                       "show its result.")  # fmt: skip
        if skipped:
            with st.expander(f"{len(skipped)} cell(s) skipped"):
                for c in skipped:
                    pair = f"{c['sender']} → {c['receiver']}"
                    st.markdown(f"- {ui.code_span(pair)} ({ui.plain(c['recipe'])}): "
                                f"{ui.plain(c['skipped_reason'])}")
        if s:
            a, b = s["base"]["a"], s["base"]["b"]
            st.caption(ui.plain(
                f"A alone {a['accuracy']:.3f} at {a['flops'] / 2e6:.2f}M MACs ({a['flops'] / 1e6:.2f}M FLOPs); "
                f"B alone {b['accuracy']:.3f} at {b['flops'] / 2e6:.2f}M MACs ({b['flops'] / 1e6:.2f}M FLOPs). "
                f"Evaluated on {s['dataset']} ({s['n_test']} test images; adapters trained on {s['n_train']})."))

    live()
    _downloads(rec, key)


# ------------------------------------------------------------------------------------------------ sweep


def sweep_view(rec: RunRecord, *, key: str, title: str | None = None) -> None:
    """A sweep's trait curves, simplicity curves (raw and normalised) and per-class heat map, filling in
    position by position while it runs."""
    runner = ui.get_runner()
    snap = runner.get(rec.id)
    run_id = rec.id

    @ui.live_while_running(run_id)
    def live() -> None:
        now = runner.get(run_id) or snap
        ui.run_header(now, key, title=title, kept="Finished positions are shown below.",
                      caption_extra=f" · [permalink](traits?{urlencode({'run': run_id})})" if title else "")
        s = now.summary if now.state == "done" else None
        data = s or partial_positions(ui.get_store(), run_id)  # the positions finished so far
        metrics = data.get("metrics")
        if not metrics:
            st.caption("Waiting for the first position…")
            return
        every = data.get("all_positions") or data["positions"]
        labels = {k: parse_metric(k).label for k in metrics}
        csv = (lambda name: f"{run_id}-{name}.csv") if s else (lambda name: None)  # CSVs once it has ended
        ui.chart(st, plots_traits.trait_curves(data, data["reference"], metrics, labels=labels, all_positions=every),
                 key=f"{key}-curves-{run_id}", file_name=csv("traits"))  # fmt: skip
        noise_words = noise_sender_words(data)  # sweeps stored before the noise sender have none
        if noise_words:
            st.caption(ui.plain(noise_words))
        ci = data.get("stitched_ci") or {}
        if any(v for spans in ci.values() for v in spans):  # sweeps stored before intervals have none
            st.caption("Error bars: 95% intervals over the test images each metric reads (exact binomial for rates; a class's "
                       "metric rests on that class's own images, so its bars are wider than overall accuracy's). "
                       "A's and B's intervals show on hover over their lines, and each class's on the per-class "
                       "heat map.")
        st.caption("  \n".join(ui.plain(explain(k)) for k in dict.fromkeys(k.partition(":")[0] for k in metrics)))
        if data.get("simplicity"):
            ui.chart(st, plots_traits.simplicity_curves(data, data["reference"], all_positions=every),
                     key=f"{key}-simp-{run_id}", file_name=csv("simplicity"))  # fmt: skip
            ui.chart(st, plots_traits.simplicity_curves(data, data["reference"], normalized=True, all_positions=every),
                     key=f"{key}-simpn-{run_id}", file_name=csv("simplicity-normalized"))  # fmt: skip
            if "grad_norm_batch" in data["simplicity"]:  # runs since issue 25: the report's own definitions too
                ui.chart(st, plots_traits.simplicity_curves(data, data["reference"], all_positions=every,
                                                            definitions="report"),
                         key=f"{key}-simpr-{run_id}", file_name=csv("simplicity-report"))  # fmt: skip
            st.caption("Lower = simpler for all three measures. Normalised: 0 = B's value, 1 = A's; a measure whose "
                       "A and B differ by less than their noise (seed-to-seed spread; for sharpness, its draws) "
                       "gets no normalised curve, and the note under the plot says so.")  # fmt: skip
        if "accuracy" in metrics:
            ui.chart(st, plots_traits.penalty_curve(data, data["reference"], all_positions=every),
                     key=f"{key}-penalty-{run_id}", file_name=csv("penalty"))  # fmt: skip
            st.caption(f"Stitching {PENALTY_WORDS}: B's accuracy minus the stitched model's at each cut, in "
                       "percentage points, as on the Stitch and Similarity pages.")  # fmt: skip
        ui.chart(st, plots_traits.per_class_heatmap(data, data["classes"], all_positions=every,
                                                    colorbar_title=colorbar_title("class_acc")),
                 key=f"{key}-heat-{run_id}", file_name=csv("per-class"))  # fmt: skip
        if s:
            if s.get("control_note"):
                st.caption(ui.plain(s["control_note"]))
            if s.get("simplicity_definition"):
                d = s["simplicity_definition"]
                st.caption(ui.plain(f"Sharpness: {d['sharpness']} (eps = {d['eps']}, {d['draws']} draws). Gradient "
                                    f"norm: {d['grad_norm']}. gzip: {d['gzip_bits']}. Measured on {d['weights']}."))
                if "sharpness_abs" in d:
                    st.caption(ui.plain(f"The report's definitions: gradient norm per batch: {d['grad_norm_batch']}. "
                                        f"Sharpness: {d['sharpness_abs']}. gzip: {d['gzip_bits_all']}."))
            if s.get("control_refs"):
                st.caption("Random-init control pairs (A's twin, B's twin; each from its own seed): "
                           + ui.plain("; ".join(f"{a} , {b}" for a, b in s["control_refs"])))
            st.caption(ui.plain(f"Evaluated on {s['dataset']} ({s['n_test']} test images); adapter data "
                                f"{s['train_data']} ({s['n_train']} images)."))

    live()
    _downloads(rec, key)


# ------------------------------------------------------------------------------------- language models


def lm_view(rec: RunRecord, *, key: str) -> None:
    """A merge, lmstitch or lmdepth run: loss cards, loss bars or penalty vs depth (filling in while it
    runs), the adapter's training loss, the (i, j) heat map and the samples."""
    runner = ui.get_runner()
    snap = runner.get(rec.id)
    run_id = rec.id

    @ui.live_while_running(run_id)
    def live() -> None:
        now = runner.get(run_id) or snap
        ui.run_header(now, key)
        s = now.summary if now.state == "done" else {}
        if s:
            _lm_cards(s, now.kind)
        has_loss = "loss" in now.metrics or not now.is_final  # the adapter's training loss (stitches only)
        left, right = st.columns(2) if has_loss else (st.container(), None)
        if now.kind == "lmdepth":
            points = labelled_points(s.get("points") or []) if s else partial_points(now.metrics)
            ui.chart(left, plots_lm.penalty_by_depth(points), key=f"{key}-depth-{run_id}",
                     file_name=f"{run_id}-penalty-by-depth.csv" if s else None)  # fmt: skip
        elif s:
            ui.chart(left, plots_lm.loss_bars(s), key=f"{key}-bars-{run_id}", file_name=f"{run_id}-loss.csv")
        if right is not None:
            curves = {"loss": now.metrics.get("loss", [])}
            ui.chart(right, plots.training_curves(curves, title="Adapter training loss (stitches one after another)"),
                     key=f"{key}-loss-{run_id}", file_name=f"{run_id}-training-loss.csv" if s else None)  # fmt: skip
        if s.get("heatmap"):
            ui.chart(st, plots_lm.penalty_heatmap(s["heatmap"], colorbar_title=colorbar_title("loss_penalty")), key=f"{key}-lmheat-{run_id}",
                     file_name=f"{run_id}-penalty-heatmap.csv")  # fmt: skip
        if now.kind == "lmdepth" or s:
            st.caption(f"The {plots_lm.PENALTY_AXIS}: above 0 = a higher loss than the base model (the one whose "
                       f"head is used); {LM_PAPER_NOTE}. The image pages' penalty goes the same way: "
                       f"{PENALTY_WORDS}." + (" On the heat map red = worse, blue = better." if s.get("heatmap")
                                              else ""))  # fmt: skip
        if s.get("samples"):
            _lm_samples(s)

    live()
    _downloads(rec, key)


def _lm_cards(s: dict, kind: str) -> None:
    base = s["base"]
    joined = "merged" if kind == "merge" else "stitched"

    def loss_help(score: dict) -> str:  # perplexity, and the 95% interval where the run stored one
        span = interval_words(score.get("loss_ci"), "loss")
        return (f"perplexity {score['perplexity']:.2f}" + (f" · 95% interval [{span}] nats (bootstrap over the "
                                                           "validation windows)" if span else "")
                + f"  \n{explain('loss')}")

    c = st.columns(5)
    c[0].metric("Loss A", f"{base['a']['loss']:.3f}", help=loss_help(base["a"]))
    c[1].metric("Loss B", f"{base['b']['loss']:.3f}", help=loss_help(base["b"]))
    if kind != "lmdepth":
        c[2].metric(f"Loss {joined}", f"{s['loss']:.3f}", help=loss_help(s))
        pen = interval_words(s.get("loss_penalty_ci"), "loss_penalty")
        base_role = ui.plain(str(s["penalty_base"]).upper())
        c[3].metric(f"Loss penalty (base {base_role})", format_pct(loss_penalty_pct(s["loss_penalty"])),
                    help=explain("loss_penalty") + (f" · 95% interval [{pen}] (paired: the base and the {joined} "
                                                    "model on the same windows)" if pen else ""))
        c[4].metric("Perplexity", f"{s['perplexity']:.2f}")
        st.code(" → ".join(s["layout"]), language=None)
    else:
        c[2].metric("Points", len(s["points"]))
        c[3].metric("Time", duration_words(s.get("seconds")))
        for what, why in (s.get("skipped") or {}).items():
            st.caption(ui.plain(f"{what}: skipped, {why}"))
        st.caption(ui.plain(_lm_training_words(s)))
    if kind == "lmstitch":
        st.caption(ui.plain(_lm_training_words(s)))
    if base["a"].get("loss_ci"):  # runs stored before intervals have none
        n = s["eval_tokens"] // s["block_size"]  # windows
        if kind == "lmdepth":
            st.caption(f"Error bars: 95% intervals over the {n} validation windows (bootstrap); each penalty is "
                       "paired with its base model's loss on the same windows.")
        else:
            st.caption(
                f"95% intervals over the {n} validation windows (bootstrap): A [{interval_words(base['a']['loss_ci'], 'loss')}]"
                f" · B [{interval_words(base['b'].get('loss_ci'), 'loss')}] · {joined} "
                f"[{interval_words(s.get('loss_ci'), 'loss')}] · loss penalty "
                f"[{interval_words(s.get('loss_penalty_ci'), 'loss_penalty')}] (paired: the base and the {joined} "
                "model scored on the same windows)")
    st.caption(ui.plain(f"{s['eval_tokens']:,} validation tokens of {s['text']} ({s['vocab']}) · context "
                        f"{s['block_size']} · loss in nats per token"))


def _lm_training_words(s: dict) -> str:
    """How the run's adapters were trained and which embeddings its merges read, in words."""
    if s.get("mode") == "depth":
        embed = {"tied": "the embeddings tied to the head used (head B: B's wte, wpe)", "b": "B's embeddings"}.get(
            s.get("embed", "a"), "A's embeddings (whichever head)")
        stitched = [p for p in s["points"] if p.get("mode") == "stitch"]
        held = [p["held_out"] for p in stitched if p.get("held_out")]
        merged = any(p.get("mode") == "merge" for p in s["points"])
        words = " ".join(([f"Merges read {embed}."] if merged else []) + (["Stitches read A's embeddings."]
                                                                            if stitched else []))
        if held:
            stopped = sum(h["converged"] for h in held)
            words += (f" Adapters trained until the held-out train loss stopped improving ({stopped} of {len(held)} "
                      f"stopped before the cap; steps kept: {', '.join(str(h['best_step']) for h in held)}).")
        elif stitched:
            words += " Adapters trained a fixed number of steps (stored before training to convergence)."
        return words
    held = s.get("held_out")
    start = f"started from {s['start_from']}" if s.get("start_from") else "started from its init"
    if not held:
        return f"Adapter {start}, trained {s.get('steps')} steps."
    how = "stopped: no held-out improvement" if held["converged"] else "hit the step cap"
    return (f"Adapter {start}; trained {held['stopped_at']} steps ({how}), kept step {held['best_step']} "
            f"(held-out train loss {held['loss']:.4f}; the validation text above was not looked at).")


def _lm_samples(s: dict) -> None:
    st.markdown("**Samples**: each model continues the same prompt (seed and temperature 0.8 fixed); prompt:")
    st.code(s["prompt"], language=None)
    items = list(s["samples"].items())
    for row in range(0, len(items), 3):
        cols = st.columns(3)
        for col, (name, text) in zip(cols, items[row:row + 3], strict=False):
            col.caption(ui.plain({"a": "Model A", "b": "Model B"}.get(name, name)))
            col.code(text, language=None, wrap_lines=True)


# --------------------------------------------------------------------------------------------- any run

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


def _downloads(rec: RunRecord, key: str) -> None:
    """The run's downloads (metrics CSV, JSON, bundle, report: ``ui.run_downloads``) once it has ended."""
    snap = ui.get_runner().get(rec.id)
    if snap is not None and snap.is_final:
        ui.run_downloads(snap, key)


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
