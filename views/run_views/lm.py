"""The language-model runs' view (merge, lmstitch, lmdepth): loss cards, bars or penalty by depth.

Also the adapter's training loss, the (i, j) heat map and each model's sample; lmdepth's points fill in while
the run is active (``partial_points``).
"""

from __future__ import annotations

import streamlit as st

import ui
from stitchcore.experiments.lm import labelled_points, partial_points
from stitchcore.experiments.lm.cross import ALIGN_WORDS, CONTROL_WORDS, cross_curves, cross_rows
from stitchcore.experiments.lm.cross_depth import cross_depth_points
from stitchcore.experiments.lm.words import data_words, interval_note, training_words
from stitchcore.measures.meaning import colorbar_title, explain
from stitchcore.plots import lm as plots_lm
from stitchcore.plots import runs as plots
from stitchcore.plots.penalty import LM_PAPER_NOTE, format_pct, interval_words, loss_penalty_pct
from stitchcore.report.figures import PENALTY_WORDS
from stitchcore.store.results import RunRecord
from stitchcore.timewords import duration_words

__all__ = ["lm_view"]


def lm_view(rec: RunRecord, *, key: str) -> None:
    """A merge, lmstitch or lmdepth run: loss cards, loss bars or penalty vs depth (filling in while it
    runs), the adapter's training loss, the (i, j) heat map and the samples."""
    run_id = rec.id

    def body(now) -> None:
        s = now.summary if now.state == "done" else {}
        if s.get("mode") == "cross_depth" or (not s and any(k.startswith("bpb:") for k in now.metrics)):
            return _cross_depth_body(now, s, key)
        if s.get("mode") == "cross" or (not s and any(k.startswith("loss_") for k in now.metrics)):
            return _cross_body(now, s, key)
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

    ui.live_run(run_id, key, body)


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
        st.caption(ui.plain(training_words(s)))
    if kind == "lmstitch":
        st.caption(ui.plain(training_words(s)))
    for note in (interval_note(s, kind), data_words(s)):
        if note:
            st.caption(ui.plain(note))


def _cross_body(now, s: dict, key: str) -> None:
    """A stitch across tokenizers: bits per byte beside B alone, A alone and the controls; every adapter's loss."""
    if s:
        c = st.columns(4)
        lo, hi = s["bits_per_byte_ci"]
        c[0].metric("Stitched (bits/byte)", f"{s['bits_per_byte']:.3f}", help=f"95% interval [{lo:.3f}, {hi:.3f}] "
                    "(bootstrap over the held-out windows)")
        c[1].metric("B alone (bits/byte)", f"{s['b_bits_per_byte']:.3f}")
        c[2].metric("Penalty against B", f"{s['bpb_penalty']:+.3f}", help=s["penalty_sign"])
        c[3].metric("Time", duration_words(s.get("seconds")))
        st.markdown(f"**Verdict**: {ui.plain(s['verdict'])}")
        st.code(" → ".join(s["layout"]), language=None)
    left, right = st.columns(2)
    if s:
        ui.chart(left, plots_lm.bpb_bars(cross_rows(s)), key=f"{key}-bpb-{now.id}", file_name=f"{now.id}-bpb.csv")
    ui.chart(right, plots.compare_curves(cross_curves(now.metrics), title="Adapter training loss (nats / token)"),
             key=f"{key}-xloss-{now.id}", file_name=f"{now.id}-training-loss.csv" if s else None)  # fmt: skip
    if s:
        st.caption(ui.plain(f"A: {s['tokenizers']['a']}, B: {s['tokenizers']['b']}; each of B's tokens reads "
                            f"{ALIGN_WORDS[s['alignment']]}. {s['eval_windows']} held-out windows of "
                            f"{s['window_chars']} characters ({s['eval_bytes']:,} bytes) of {s['text']}; each control "
                            "is fitted and trained as the stitch is."))  # fmt: skip


def _cross_depth_body(now, s: dict, key: str) -> None:
    """A depth sweep across tokenizers: bits per byte by depth beside the controls and B alone; the heat map."""
    points = s.get("points") if s else cross_depth_points(now.metrics)
    ui.chart(st, plots_lm.bpb_by_depth(points, s.get("b_bits_per_byte"), labels=CONTROL_WORDS),
             key=f"{key}-xdepth-{now.id}", file_name=f"{now.id}-bpb-by-depth.csv" if s else None)  # fmt: skip
    if s.get("heatmap"):
        ui.chart(st, plots_lm.bpb_heatmap(s["heatmap"]), key=f"{key}-xheat-{now.id}", file_name=f"{now.id}-bpb-heatmap.csv")
    if s:
        beats = [p["split"] for p in s["points"] if p["verdict"].startswith("carries")]
        st.caption(ui.plain(f"A: {s['tokenizers']['a']}, B: {s['tokenizers']['b']} (B alone "
                            f"{s['b_bits_per_byte']:.3f} bits/byte); each of B's tokens reads {ALIGN_WORDS[s['alignment']]}. "
                            f"The stitch beats both controls at {len(beats)} of {len(s['points'])} splits "
                            f"({', '.join(map(str, beats)) or 'none'}; paired 95% intervals over the windows)"
                            + "".join(f". {k}: skipped, {v}" for k, v in s["skipped"].items())))


def _lm_samples(s: dict) -> None:
    st.markdown("**Samples**: each model continues the same prompt (seed and temperature 0.8 fixed); prompt:")
    st.code(s["prompt"], language=None)
    items = list(s["samples"].items())
    for row in range(0, len(items), 3):
        cols = st.columns(3)
        for col, (name, text) in zip(cols, items[row:row + 3], strict=False):
            col.caption(ui.plain({"a": "Model A", "b": "Model B"}.get(name, name)))
            col.code(text, language=None, wrap_lines=True)
