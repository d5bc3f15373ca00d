"""Stitch and zoo runs: their result cards, which ``ui.run_view`` draws under a done run's header.

:data:`CARDS` maps the kind to its card (:func:`stitch_card`, :func:`zoo_card`); the Stitch and Models pages
pass it to ``ui.run_view`` for ``?run=``, and :func:`card_view` is these kinds' view for Results and lessons.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

import ui
from stitchcore.experiments.stitch import noise_sender_words as stitch_noise_words
from stitchcore.measures.intervals import seed_note
from stitchcore.measures.meaning import explain
from stitchcore.plots import runs as plots
from stitchcore.plots.penalty import format_pts, interval_words, penalty_pts
from stitchcore.store.results import RunRecord
from stitchcore.timewords import duration_words

__all__ = ["CARDS", "card_view", "stitch_card", "zoo_card"]


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
