"""Stitch: pick A, B, cuts, adapter and training; launch a background job; watch it live.

``?run=<id>`` shows that run and fills the form with its spec, so a copied link
reproduces both the result and the form.  A cut in the URL may be an alias (``cut_a=layer2``
on a ResNet): the picker selects the canonical cut (``layer2.1``) and says "layer2 = layer2.1".
"""

from __future__ import annotations

from difflib import get_close_matches

import streamlit as st

import ui
from stitchcore.cuts import Cut, alias_note
from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.dataset_check import default_dataset
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.models.sources.zoo import list_zoo_models
from stitchcore.params import spec_fields
from stitchcore.stitching.adapters import AdapterSpec, compatibility, list_adapters
from ui import spec_form
from ui.text import quoted
from views import run_views

KIND = "stitch"
PICKERS = {"a": "ref_a", "b": "ref_b"}  # the model pickers' text fields (ui.pick_model) hold a link's refs


def _cut_choice(label: str, names: list[str], key: str, default: str | None, cuts: list[Cut]) -> str:
    """A cut picker over ``names``; a value that is an alias of one (from the URL) selects its canonical
    cut, and "alias = canonical" is shown below while that cut stays selected."""
    by_name = {c.name: c for c in cuts}
    value = st.session_state.get(key)
    if value not in names:
        canonical = next((c.name for c in cuts if value in c.aliases), None)
        if canonical in names:
            st.session_state[f"_alias_{key}"] = (value, canonical)
            st.session_state[key] = canonical
        else:
            replacement = default if default in names else names[len(names) // 2]
            if value and value == st.query_params.get(key):  # the link names a cut this model does not have
                st.session_state[f"_unknown_{key}"] = (value, replacement, get_close_matches(value, names, n=3))
            st.session_state[key] = replacement

    def label_of(name: str) -> str:
        outer = list(by_name[name].outer_aliases) if name in by_name else []
        return f"{name}  (= {', '.join(outer)})" if outer else name

    picked = st.selectbox(label, names, key=key, format_func=label_of, persist_state="session")
    alias, canonical = st.session_state.get(f"_alias_{key}", (None, None))
    if alias and picked == canonical:
        st.caption(f"Cut {ui.plain(alias_note(alias, canonical))}: the same tensor, stored under its canonical name.")
    unknown, shown, close = st.session_state.get(f"_unknown_{key}", (None, None, []))
    if unknown and picked == shown:
        near = f" (close: {', '.join(close)})" if close else ""
        st.warning(ui.plain(f"The link asked for cut {quoted(unknown)}, which this model does not have{near}; "
                            f"showing {shown}."), icon=":material/warning:")
    return picked


def _no_receiver_advice(sender: Cut, cuts_a: list[Cut], cuts_b: list[Cut], adapter: AdapterSpec) -> str:
    """What to do when no receiver fits ``sender``: the sender cuts that have one, else another adapter kind."""
    text = f"No cut of B can receive A[{sender.name}] with a {adapter.kind} adapter; "
    fitting = [s.name for s in cuts_a if any(compatibility(s, r, adapter) is None for r in cuts_b)]
    if fitting:
        more = f" (and {len(fitting) - 6} more)" if len(fitting) > 6 else ""
        return text + f"pick a sender cut that has one: {', '.join(fitting[:6])}{more}."

    def fits_with(kind: str) -> bool:
        try:
            other = AdapterSpec(kind=kind)
        except StitchError:
            return False
        return any(compatibility(sender, r, other) is None for r in cuts_b)

    kinds = [k for k in list_adapters() if k != adapter.kind and fits_with(k)]
    if kinds:
        return text + f"try the {' or '.join(kinds)} adapter."
    return text + "no cut of A fits any cut of B with it: the two models' layers do not meet."


ui.page_setup("Stitch")
st.title("Stitch two models")
url_run = st.query_params.get("run")
if spec_form.from_link(KIND, state_keys=PICKERS) is not None:
    for _key in ("cut_a", "cut_b", "head_cut"):  # a new URL: the cut notes of the last one are gone
        st.session_state.pop(f"_alias_{_key}", None)
        st.session_state.pop(f"_unknown_{_key}", None)
url_notes = spec_form.show_link_notes(clear=not spec_form.linked(KIND))

zoo = sorted(r.summary["ref"] for r in list_zoo_models(ui.get_store()))
if not zoo:
    st.info("No trained models yet: run the classroom demo on Home, train one on the Models page, "
            "or type any model ref below (timm, torchvision, hf, file).")

models, cuts = st.columns(2)
with models:
    ref_a = ui.pick_model("a", zoo, 0)
    ref_b = ui.pick_model("b", zoo, 1)

loaded, still_training = {}, False
for role, ref in (("a", ref_a), ("b", ref_b)):
    if ref is None:
        continue
    try:
        with st.spinner(f"Loading {ui.plain(ref)} …"):
            loaded[role] = (ui.load_for_display(ref), ui.cuts_of(ref))
    except Exception as exc:  # an unexpected loader failure must not kill the page
        training = [j for j in ui.get_runner().list(active_only=True) if j.kind == "zoo"]
        if isinstance(exc, StitchError) and ref.startswith("zoo:") and training:
            st.info(f"Model {role.upper()} ({ui.plain(ref)}) is not trained yet; {len(training)} zoo job(s) are "
                    "running. The form fills in when they finish.")
            still_training = True
        else:
            ui.show_error(exc, f"loading {ref}")

spec: StitchSpec | None = None
why_not: str | None = None  # why Launch is disabled
if len(loaded) == 2:
    (model_a, cuts_a), (model_b, cuts_b) = loaded["a"], loaded["b"]
    with st.expander("Adapter and training", expanded=False):
        form = spec_form.widgets(KIND)
    kind, norm, resample, init, head = (form[k] for k in ("kind", "norm", "resample", "init", "head"))
    with cuts:
        cut_a = _cut_choice("Sender cut (A)", [c.name for c in cuts_a], "cut_a", None, cuts_a)
        sender = next(c for c in cuts_a if c.name == cut_a)
        try:
            adapter = AdapterSpec(**spec_fields(KIND, form)["adapter"])
        except StitchError as exc:
            spec_form.show_refusal(KIND, exc, key="fix_adapter")
            adapter = None
        reasons = {c.name: compatibility(sender, c, adapter) for c in cuts_b} if adapter else {}
        ok = [name for name, why in reasons.items() if why is None]
        if ok:
            cut_b = _cut_choice("Receiver cut (B)", ok, "cut_b", cut_a, cuts_b)
            receiver = next(c for c in cuts_b if c.name == cut_b)
            st.caption(ui.plain(f"A[{sender.name}] {sender.layout} {tuple(sender.shape)} → "
                                f"B[{receiver.name}] {receiver.layout} {tuple(receiver.shape)}"))
        elif adapter:
            st.warning(ui.plain(_no_receiver_advice(sender, cuts_a, cuts_b, adapter)))
        if len(ok) < len(reasons):
            with st.expander(f"{len(reasons) - len(ok)} receiver cut(s) not offered"):
                for name, why in reasons.items():
                    if why is not None:
                        st.markdown(f"- {ui.code_span(name)}: {ui.plain(why)}")
        head_cut = None
        if head == "a" and ok:
            later = [c.name for c in cuts_b if c.depth > receiver.depth and c.name in {x.name for x in cuts_a}]
            head_cut = _cut_choice("Head cut (A's head from here)", later, "head_cut", later[0] if later else None,
                                   cuts_b) if later else None
            if not later:
                st.warning("No cut after the receiver is shared by A and B: head preservation needs same-family models.")
    with models:
        default_data = default_dataset(model_a, model_b)
        dataset = ui.pick_dataset("", default_data)
        why_not = ui.dataset_fit("", dataset, {"a": model_a, "b": model_b})

    def _pre(m) -> str:
        return m.preprocess.describe() if m.preprocess else "none"

    st.caption(ui.plain(f"A's input transform: {_pre(model_a)} · B's: {_pre(model_b)}"))
    if not (adapter and ok):
        why_not = why_not or f"no cut of B can receive A[{cut_a}]"
    elif head == "a" and not head_cut:
        why_not = why_not or "head a needs a cut after the receiver that A and B share"
    if why_not is None:
        try:
            spec = spec_form.spec_from_form(
                KIND, form, a=ref_a, b=ref_b, cut_a=cut_a, cut_b=cut_b, head_cut=head_cut,
                dataset=None if dataset == default_data else dataset,  # None: B's own set (the run id as before)
            )
        except StitchError as exc:
            spec_form.show_refusal(KIND, exc, key="fix_spec")
            why_not = "the form has an error (above)"
elif ref_a is None or ref_b is None:
    why_not = "pick models A and B"
else:
    why_not = "the models are still training" if still_training else "a model could not be loaded (above)"

launch, rerun = st.columns([1, 1])
with launch:
    if url_notes and spec is not None:
        st.caption(f":material/warning: Launch runs the form as shown: {len(url_notes)} value(s) of the link were "
                   "changed (see the warning above).")
    if spec is not None:  # what Launch runs, read back from the spec (not from the widgets)
        st.caption(ui.plain(f"Launch runs A[{spec.cut_a}] → B[{spec.cut_b}] with a {spec.settings()}."))
    ui.show_estimate("stitch", spec, form_keys={"epochs": "epochs", "max_train": "max_train", "max_test": "max_test"})
    clicked = ui.launch_button("Launch", why_not, key="launch")
if clicked and spec is not None:
    try:
        job = ui.get_runner().submit("stitch", spec)
    except StitchError as exc:
        ui.show_error(exc)
    else:
        st.query_params.from_dict({"run": job.id, **spec_form.link_params(KIND, spec)})
        st.session_state["_prefilled"] = repr(sorted(st.query_params.to_dict().items()))
        url_run = job.id
ui.rerun_when_jobs_finish()  # a model trained meanwhile shows up in the pickers
if url_run:
    current = ui.get_runner().get(url_run)
    if current is not None and current.is_final and current.kind == "stitch":
        if rerun.button("Re-run", help="train again although the store has this result", disabled=ui.viewer_mode()):
            spec_again = spec_from_record(ui.get_store().lookup(url_run))
            ui.get_runner().submit("stitch", spec_again, rerun=True)
            st.rerun()
    st.divider()
    if current is not None and current.kind not in run_views.CARDS:  # e.g. stitch?run=<a matrix's id>
        page = ui.PAGE_FOR_KIND.get(current.kind, "results")
        st.info(f"Run {ui.code_span(url_run)} is a {ui.plain(current.kind)} run, not a stitch: it opens on its own "
                "page.")
        st.page_link(ui.page_file(page), label=f"Open it on the {ui.PAGE_TITLES[page]} page",
                     query_params={"run": url_run}, icon=":material/open_in_new:")
    else:
        ui.run_view(url_run, key="stitch", cards=run_views.CARDS)  # a stitch (or zoo) run: its result card
