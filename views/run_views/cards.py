"""Stitch and zoo runs: their result cards, which ``ui.run_view`` draws under a done run's header.

:data:`CARDS` maps the kind to its card (:func:`stitch_card`, :func:`zoo_card`); the Stitch and Models pages
pass it to ``ui.run_view`` for ``?run=``, and :func:`card_view` is these kinds' view for Results and lessons.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

import ui
from stitchcore.experiments.stitch_words import summary_notes
from stitchcore.measures.meaning import explain
from stitchcore.plots import runs as plots
from stitchcore.plots.penalty import format_pts, penalty_pts
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
    for note in summary_notes(s):  # a bundle's cut names are text
        st.caption(ui.plain(note))
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
