"""An assemble run's view: accuracy against FLOPs with the Pareto front, and a heat map per recipe.

The points fill in sender by sender while the run is active; a click on one opens that assembled network on
the Stitch page (not from a lesson's student view).
"""

from __future__ import annotations

import streamlit as st

import ui
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.assemble import assembled_cells, pareto_front, recipe_name
from stitchcore.experiments.stitch_fields import ADAPTER_KEYS
from stitchcore.measures.meaning import colorbar_title
from stitchcore.params import link_params
from stitchcore.plots import assemble as plots_assemble
from stitchcore.stitching.adapters import NO_DOWNSAMPLE
from stitchcore.store.results import RunRecord

__all__ = ["assemble_view"]


def assemble_view(rec: RunRecord, *, key: str) -> None:
    """An assemble run: accuracy against FLOPs with the Pareto front and A and B (a click on a point opens that
    network on the Stitch page), a heat map per recipe over (sender, receiver), the recipes compared; filling in
    sender by sender while it runs."""
    spec = spec_from_record(rec)
    run_id = rec.id

    def body(now) -> None:
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
                st.switch_page(ui.page_file("stitch"), query_params=link_params("stitch", spec.cell_stitch(cells[index]), explicit=ADAPTER_KEYS))
        no_front = plots_assemble.front_words(len(cells), base, front)
        front_text = (f". {no_front} " if no_front else
                      "; dotted = the Pareto front (no network is both more accurate and cheaper). ")  # fmt: skip
        chained = getattr(spec, "rescale", "oneshot") == "chained"
        st.caption("Each point is one assembled network: A up to the sender cut, an adapter, B from the receiver "
                   f"cut. Colour = adapter kind, shape = rescaling; stars = A and B alone{ui.plain(front_text)}"
                   "FLOPs count 2 per multiply-add (MACs, the paper's unit, are half; in the hover). "
                   + ("Gaps of more than 2x are bridged by one adapter per 2x step. " if chained else
                      "Gaps are bridged by one adapter resizing by the whole ratio (the reading before issue 25). ")
                   + "Click a point to open it on the Stitch page as its own stitch (same adapter, rescaling and "
                     "training" + ("; No Downsample is the assembly's alone, so such a point opens as a near, not "
                                   "the same, network)." if NO_DOWNSAMPLE in spec.resamples else ")."))  # fmt: skip
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

    ui.live_run(run_id, key, body, kept="Finished cells are kept below, and a re-launch resumes from them.")
