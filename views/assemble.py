"""Assemble: new networks from A's bottom and B's top at disparate depths and across families (Traft & Cheney).

``?run=<assemble run id>`` shows a run (filling in while it runs) and fills the form from it.  The form is generated
from the assemble kind's declared fields (``ui.spec_form``), so a link may name any of them: ``?a=REF&b=REF`` picks
the models, ``&senders=block1,block2`` their cuts, ``&adapters=linear,bottleneck&epochs=3`` the recipes and
training (a value the form cannot use is held, with a note).
"""

from __future__ import annotations

import streamlit as st

import ui
from stitchcore.errors import StitchError
from stitchcore.experiments.assemble import assembled_cells, cell_rows, default_cuts
from stitchcore.experiments.dataset_check import default_dataset
from stitchcore.experiments.field_words import field_words
from stitchcore.experiments.matrix.recommend import TOP, cell_words, proxy_run, proxy_spec, ranking_choices, recommend
from stitchcore.measures.meaning import explain
from stitchcore.models.sources.zoo import list_zoo_models
from stitchcore.params import declared
from stitchcore.store.results import run_id_for
from ui import spec_form
from views import run_views

KIND, PREFIX = "assemble", "asm_"
PICKERS = {"a": "asm_ref_a", "b": "asm_ref_b"}  # the model pickers' text fields (ui.pick_model) hold a link's refs
CUTS = {"a": "senders", "b": "receivers"}  # each model's cut picker (state key: asm_senders, asm_receivers)
ROWS = (("adapters",), ("norm", "resample"), ("rescale", "cls_token"), ("epochs", "max_train"), ("finetune_baseline",))


def _cut_picker(ref: str, role: str) -> tuple[str, ...] | None:
    """The cuts of one model to try (the default set preselected); None when the model's cuts cannot be listed."""
    try:
        cuts = ui.cuts_of(ref)
    except StitchError as exc:
        ui.show_error(exc)
        return None
    names, key, layouts = [c.name for c in cuts], PREFIX + CUTS[role], {c.name: c.layout for c in cuts}
    chosen, before = st.session_state.get(key), st.session_state.get(f"_{key}_ref")
    if chosen is None or not set(chosen) <= set(names) or before not in (None, ref):
        st.session_state[key] = [c.name for c in default_cuts(cuts)]  # another model: its default set
    st.session_state[f"_{key}_ref"] = ref
    words = field_words(KIND, CUTS[role])
    picked = set(st.multiselect(words.label, names, key=key, persist_state="session", help=words.help,
                                format_func=lambda n: f"{n} ({layouts[n]})"))  # fmt: skip
    return tuple(n for n in names if n in picked)


def _train_first(ref_a: str, ref_b: str, data: str | None) -> None:
    """The cut pairs of A x B ranked without training (a proxy or closed-form matrix of the pair), or a button
    that launches the proxy matrix that ranks them."""
    rec = proxy_run(ui.get_store(), ref_a, ref_b, data)
    with st.expander("Train these first: cut pairs ranked without training", expanded=rec is not None):
        if rec is None:
            proxy = proxy_spec(ref_a, ref_b, data)
            job = ui.get_runner().get(run_id_for("matrix", proxy.to_dict()))
            st.caption("A proxy matrix fits a linear map into every cut pair of A and B from one pass over the "
                       "training images (no training, nothing scored) and ranks the pairs by the fits' held-out "
                       "R² (on the Similarity page, also by CKA).")  # fmt: skip
            if job is not None and not job.is_final:
                st.caption(ui.plain(f"Ranking: {job.state} {job.message}"))
            elif st.button("Rank every cut pair (proxy matrix)", key="asm_rank"):
                try:
                    job = ui.get_runner().submit("matrix", proxy)
                except StitchError as exc:
                    ui.show_error(exc)
            if job is not None:
                st.page_link(ui.page_file("similarity"), label="Watch it on the Similarity page",
                             query_params={"run": job.id}, icon=":material/grid_on:")
            return
        top = recommend(rec.summary, by=ranking_choices(rec.summary)[0], top=TOP)
        for k, cell in enumerate(top, start=1):
            st.markdown(f"{k}. {ui.code_span(cell['sender'])} → {ui.code_span(cell['receiver'])}: "
                        f"{ui.plain(cell_words(cell))}")
        ranked = {"asm_senders": list(dict.fromkeys(c["sender"] for c in top)),
                  "asm_receivers": list(dict.fromkeys(c["receiver"] for c in top))}
        c = st.columns([2, 3])  # "Use these cuts" sets the pickers before they are drawn (a callback)
        c[0].button("Use these cuts", key="asm_use_ranked", on_click=st.session_state.update, args=(ranked,),
                    help="the pickers above take the cuts of these pairs (every pair of them is then assembled)")
        c[1].page_link(ui.page_file("similarity"), label="The whole ranking on the Similarity page",
                       query_params={"run": rec.id}, icon=":material/grid_on:")


ui.page_setup("Assemble")
st.title("Assemble networks from parts")
st.caption(
    "A up to a sender cut, a trained adapter, B from a receiver cut: a low layer of A into a high layer of B skips "
    "B's blocks, the other way repeats them, and the two may be different families (a ResNet's feature maps into "
    "a ViT's tokens or a Swin's maps). Every cut pair is tried with every adapter recipe (kind × BatchNorm × "
    "rescaling, Traft & Cheney); each network's accuracy is set against its cost (multiply-adds, the paper's "
    "unit; FLOPs = 2 per MAC)."
)
if (applied := spec_form.from_link(KIND, prefix=PREFIX, state_keys=PICKERS)) is not None:
    for _key in CUTS.values():  # the link's cuts, whichever model was picked before; none: the model's default set
        st.session_state.pop(f"_asm_{_key}_ref", None)
        _cuts = st.session_state.pop(PREFIX + _key, None)
        if _key in applied:
            st.session_state[PREFIX + _key] = list(_cuts)  # a multiselect's list
spec_form.show_link_notes(PREFIX, clear=not spec_form.linked(KIND))

zoo = sorted(r.summary["ref"] for r in list_zoo_models(ui.get_store()))
left, right = st.columns(2)
with left:
    ref_a, ref_b = ui.pick_model("a", zoo, 0, prefix=PREFIX), ui.pick_model("b", zoo, 1, prefix=PREFIX)
    senders, receivers = (_cut_picker(ref, role) if ref else None for role, ref in (("a", ref_a), ("b", ref_b)))
with right:
    form = {}
    for keys in ROWS:
        form |= spec_form.widgets(KIND, keys, per_row=len(keys), prefix=PREFIX)
    with st.expander("More training settings: optimizer, seed, fine-tuning"):
        form |= spec_form.widgets(KIND, [f.key for f in declared(KIND) if not f.role and f.key not in form],
                                  per_row=3, prefix=PREFIX)  # fmt: skip
    models, why_not, data = {}, None, None  # data: None for the models' own set (the run ids as before)
    for role, ref in (("a", ref_a), ("b", ref_b)):
        if ref:
            try:
                models[role] = ui.load_for_display(ref)
            except Exception as exc:  # noqa: BLE001 - a loader failure is shown, not raised
                ui.show_error(exc, f"loading {ref}")
    if len(models) == 2:
        default_data = default_dataset(models["a"], models["b"])
        dataset = ui.pick_dataset(PREFIX, default_data)
        why_not, data = ui.dataset_fit(PREFIX, dataset, models), None if dataset == default_data else dataset

if len(models) == 2:
    _train_first(ref_a, ref_b, data)

spec = None
if len(models) < 2:
    why_not = "a model could not be loaded (above)" if ref_a and ref_b else "pick models A and B"
elif not senders or not receivers:
    why_not = "pick at least one cut of A and one of B"
elif not (form["adapters"] and form["norm"] and form["resample"]):
    why_not = "pick at least one adapter kind, BatchNorm placement and rescaling"
if why_not is None:
    try:
        spec = spec_form.spec_from_form(KIND, form, a=ref_a, b=ref_b, senders=senders, receivers=receivers,
                                        dataset=data)
        networks = len(senders) * len(receivers) * len(spec.recipes())
        st.caption(f"{len(senders)} × {len(receivers)} cut pairs × {len(spec.recipes())} recipes = {networks} "
                   "networks (pairs no adapter can join are skipped with the reason).")
    except StitchError as exc:
        spec_form.show_refusal(KIND, exc, prefix=PREFIX)
        why_not = "the form has an error (above)"

ui.show_estimate(KIND, spec, form_keys={k: PREFIX + k for k in ("epochs", "max_train", "max_test")})
if ui.launch_button("Launch", why_not, key="asm_launch") and spec is not None:
    try:
        job = ui.get_runner().submit(KIND, spec)
    except StitchError as exc:
        ui.show_error(exc)
    else:
        st.query_params.from_dict({"run": job.id})  # the run's view below; its spec is the form's

ui.rerun_when_jobs_finish()  # a model trained meanwhile shows up in the pickers
if st.query_params.get("run"):
    st.divider()
    rec = ui.linked_run(st.query_params["run"], (KIND,), "an assembly")
    if rec is not None:
        st.caption(explain("accuracy"))  # the number every point, bar and heat-map cell below shows
        run_views.assemble_view(rec, key="asm")
        cells = rec.summary.get("cells") or assembled_cells(ui.get_store(), rec.id)  # done, or the cells so far
        if cells:
            st.subheader("Every network")
            st.caption("Accuracy and penalty (B alone minus the network) with their 95% intervals over the test images "
                       "(the penalty's paired: both scored on the same images; runs stored before issue 39 have none), "
                       "the whole network's multiply-adds, and the adapter's parameters beside them: recipes compared "
                       "here are not of one size (a strided linear adapter is a patch convolution, kernel x kernel "
                       "times a 1x1 one's weights).")  # fmt: skip
            st.dataframe(cell_rows(cells), hide_index=True, width="stretch", key="asm-cells")
