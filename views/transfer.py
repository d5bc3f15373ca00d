"""Transfer: a linear probe and class directions carried from A's cut through a fitted stitch into B's (issue 43).

``?run=<transfer run id>`` shows a run.  The form is generated from the transfer kind's declared fields
(``ui.spec_form``): ``?a=REF&b=REF`` picks the models, ``&cut_a=fc1&cut_b=fc1`` one cut pair (none: along depth).
"""

from __future__ import annotations

import streamlit as st

import ui
from stitchcore.errors import StitchError
from stitchcore.models.sources.zoo import list_zoo_models
from ui import spec_form
from views import run_views

KIND, PREFIX = "transfer", "tr_"
PICKERS = {"a": "tr_ref_a", "b": "tr_ref_b"}  # the model pickers' text fields (ui.pick_model) hold a link's refs


def _cut(ref: str, role: str) -> str | None:
    """One cut of a model, or None: along depth."""
    try:
        names = [c.name for c in ui.cuts_of(ref)]
    except StitchError as exc:
        ui.show_error(exc)
        return None
    label = {"a": "Cut in A", "b": "Cut in B"}[role]
    pick = st.selectbox(label, ["(along depth)" if role == "a" else "(A's depth)", *names], key=f"{PREFIX}cut_{role}",
                        help="A's cut the probe is fitted on and B's it is carried into; along depth: A's cuts "
                             "from shallow to deep, each with B's at the same relative depth")  # fmt: skip
    return None if pick.startswith("(") else pick


ui.page_setup("Transfer")
st.title("Transfer a probe through a stitch")
st.caption("Fit a linear probe of the classes on A's layer, carry it through a stitch adapter fitted between A's and "
           "B's layers, and read it on B without fitting anything on B: beside a probe fitted on B (the ceiling) and "
           "one carried through a random-init adapter (the floor). Class directions are carried too, and added to B's "
           "layer to see whether they steer B's output as B's own do. Two language models (other tokenizers too): the "
           "probe reads whether a token is inside a string literal.")
spec_form.from_link(KIND, prefix=PREFIX, state_keys=PICKERS)
spec_form.show_link_notes(PREFIX, clear=not spec_form.linked(KIND))
zoo = sorted(r.summary["ref"] for r in list_zoo_models(ui.get_store()))  # two image models, or two language models
left, right = st.columns(2)
with left:
    ref_a, ref_b = ui.pick_model("a", zoo, 0, prefix=PREFIX), ui.pick_model("b", zoo, 1, prefix=PREFIX)
with right:
    cut_a = _cut(ref_a, "a") if ref_a else None
    cut_b = _cut(ref_b, "b") if ref_b and cut_a else None
    form = spec_form.widgets(KIND, ["max_train", "max_test", "seed"], per_row=3, prefix=PREFIX)
spec, why_not = None, None if ref_a and ref_b else "pick models A and B"
if why_not is None:
    try:
        spec = spec_form.spec_from_form(KIND, form, a=ref_a, b=ref_b, cut_a=cut_a, cut_b=cut_b)
    except StitchError as exc:
        spec_form.show_refusal(KIND, exc, prefix=PREFIX)
        why_not = "the form has an error (above)"
ui.show_estimate(KIND, spec)
if ui.launch_button("Launch", why_not, key="tr_launch") and spec is not None:
    try:
        job = ui.get_runner().submit(KIND, spec)
    except StitchError as exc:
        ui.show_error(exc)
    else:
        st.query_params.from_dict({"run": job.id})
if st.query_params.get("run"):
    st.divider()
    rec = ui.linked_run(st.query_params["run"], (KIND,), "a transfer")
    if rec is not None:
        run_views.transfer_view(rec, key="tr")
