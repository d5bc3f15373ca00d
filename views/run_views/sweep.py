"""A sweep run's view: its trait curves, simplicity curves and per-class heat map.

The curves fill in position by position while the run is active (``partial_positions``); their CSV downloads
come once it has ended.
"""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

import ui
from stitchcore.experiments.sweep import noise_sender_words, partial_positions
from stitchcore.measures.meaning import colorbar_title, explain
from stitchcore.measures.traits import parse_metric
from stitchcore.plots import traits as plots_traits
from stitchcore.report.figures import PENALTY_WORDS
from stitchcore.store.results import RunRecord

__all__ = ["sweep_view"]


def sweep_view(rec: RunRecord, *, key: str, title: str | None = None) -> None:
    """A sweep's trait curves, simplicity curves (raw and normalised) and per-class heat map, filling in
    position by position while it runs."""
    run_id = rec.id

    def body(now) -> None:
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

    ui.live_run(run_id, key, body, title=title, kept="Finished positions are shown below.",
                caption_extra=f" · [permalink](traits?{urlencode({'run': run_id})})" if title else "")
