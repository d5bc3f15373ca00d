"""A similarity run's heat maps on a page (its own view, or beside a matrix): which map is shown, and what it says.

A run with a random-init-B null that has a spread (two untrained Bs or more) opens on its calibrated map, the
value against those untrained Bs, with a switch to the raw maps (the values beside the shuffled-input baseline,
the untrained Bs' mean and the dependence test); a run stored before it shows its raw maps and says why.  The
panels and the words come from the library (``report.figures.cka_panels``, ``experiments.similarity``).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

import ui
from stitchcore.experiments.similarity import random_null_map, similarity_map_words
from stitchcore.measures.meaning import explain, list_meanings
from stitchcore.report.figures import MEASURE_TITLES, SIMILARITY_VIEWS, HeatPanel, cka_panels, measure_words

__all__ = ["VIEW_WORDS", "notes", "panels"]

VIEW_WORDS = {"calibrated": "calibrated: against random-init Bs", "raw": "raw values and their baselines"}


def panels(summary: dict[str, Any], key: str) -> list[HeatPanel]:
    """The switch between the calibrated and the raw maps (where the run has both: ``{key}_simview``) and a line
    on what the shown maps are; returns the panels to draw."""
    view = "raw"
    if random_null_map(summary) is not None:
        view = st.radio("Similarity maps", SIMILARITY_VIEWS, horizontal=True, key=f"{key}_simview",
                        format_func=VIEW_WORDS.get,
                        help="calibrated: trained B's value in standard deviations of untrained Bs' values (B's "
                             "architecture, random weights), what B's training adds; raw: the values, beside the "
                             "shuffled-input baseline, the untrained Bs' mean and the dependence test (shuffled "
                             "images: passed by any two networks fed the same images)")  # fmt: skip
    st.caption(ui.plain(similarity_map_words(summary, view)))
    return cka_panels(summary, view)


def notes(summary: dict[str, Any]) -> None:
    """Under a similarity run's maps: the measure in words, the images, and the untrained Bs it was held against."""
    m = summary.get("measure", "cka-linear")
    what = explain(m) if m in list_meanings() else f"{MEASURE_TITLES.get(m, m)}: {measure_words(m)}"
    ci_words = " Hover a cell for its 95% interval over the images." if summary.get("values_ci") else ""
    st.caption(ui.plain(f"{what}. {summary.get('n', '?')} images; the baseline pairs each image of A with another "
                        f"of B.{ci_words}"))  # a bundle's measure name is text
    twin = summary.get("random_null") or {}
    refs = twin.get("refs") or ([twin["ref"]] if twin.get("ref") else [])
    if refs and twin.get("values"):
        which = ui.code_span(refs[0]) + (f" … {ui.code_span(refs[-1])}" if len(refs) > 1 else "")
        st.caption(f"Untrained B{'s' if len(refs) > 1 else ''} ({which}): the same measure against B's architecture "
                   f"with random weights, {len(refs)} seed{'s' if len(refs) > 1 else ''}.")
