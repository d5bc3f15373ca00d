"""Assemble: new networks from A's bottom and B's top at disparate depths and across families (Traft & Cheney).

``?run=<assemble run id>`` shows a run (filling in while it runs) and fills the form from it;
``?a=REF&b=REF`` picks the two models.
"""

from __future__ import annotations

import streamlit as st

import ui
from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.assemble import (
    DEFAULT_KINDS,
    AssembleSpec,
    assembled_cells,
    cell_rows,
    default_cuts,
)
from stitchcore.experiments.dataset_check import default_dataset
from stitchcore.experiments.matrix.recommend import (
    TOP,
    cell_words,
    proxy_run,
    proxy_spec,
    ranking_choices,
    recommend,
)
from stitchcore.measures.meaning import explain
from stitchcore.models.sources.zoo import list_zoo_models
from stitchcore.plots.assemble import HERNANDEZ
from stitchcore.stitching.adapter_kinds import list_adapters
from stitchcore.stitching.adapters import CLS_TOKENS, NO_DOWNSAMPLE, NORMS, RESAMPLES, RESCALES
from stitchcore.store.results import run_id_for
from views import run_views

ui.page_setup("Assemble")
st.title("Assemble networks from parts")
st.caption(
    "A up to a sender cut, a trained adapter, B from a receiver cut: a low layer of A into a high layer of B skips "
    "B's blocks, the other way repeats them, and the two may be different families (a ResNet's feature maps into "
    "a ViT's tokens or a Swin's maps). Every cut pair is tried with every adapter recipe (kind × BatchNorm × "
    "rescaling, Traft & Cheney); each network's accuracy is set against its cost (multiply-adds, the paper's "
    "unit; FLOPs = 2 per MAC)."
)
KINDS = tuple(k for k in list_adapters() if k != "identity")  # a merge adds no adapter: not a recipe here
DEFAULTS = AssembleSpec(a="zoo:x", b="zoo:x")
RESAMPLE_WORDS = {NO_DOWNSAMPLE: "no downsample"}  # the chips stay short; the help names the paper's variants
RESCALE_WORDS = {"chained": "one adapter per 2x step (the paper's)", "oneshot": "one adapter, the whole ratio at once"}


def _prefill(run_id: str) -> None:
    """A permalink fills the form with its spec, once per run id."""
    if st.session_state.get("_asm_prefilled") == run_id:
        return
    st.session_state["_asm_prefilled"] = run_id
    rec = ui.get_store().lookup(run_id)
    if rec is None or rec.kind != "assemble":
        return
    try:
        spec = spec_from_record(rec)
    except StitchError:  # a record this version cannot read: the run's view below says why
        return
    st.session_state.update(asm_pick_a=spec.a, asm_ref_a=spec.a, asm_pick_b=spec.b, asm_ref_b=spec.b,
                            asm_kinds=list(spec.kinds), asm_norms=list(spec.norms), asm_resamples=list(spec.resamples),
                            asm_cls=spec.cls_token, asm_rescale=spec.rescale, asm_epochs=spec.epochs, asm_finetune=spec.finetune_baseline,
                            asm_max_train=spec.max_train or 0, asm_dataset=spec.dataset)  # fmt: skip
    if spec.senders is not None:
        st.session_state["asm_senders"] = list(spec.senders)
    if spec.receivers is not None:
        st.session_state["asm_receivers"] = list(spec.receivers)


def _prefill_models() -> None:
    """``?a=REF&b=REF`` picks the two models, once per pair."""
    pair = (st.query_params.get("a"), st.query_params.get("b"))
    if st.session_state.get("_asm_pair") == pair:
        return
    st.session_state["_asm_pair"] = pair
    for role, ref in zip("ab", pair, strict=True):
        if ref:
            st.session_state.update({f"asm_pick_{role}": ref, f"asm_ref_{role}": ref})


def _cut_picker(ref: str, role: str) -> tuple[str, ...] | None:
    """The cuts of one model to try (the default set preselected); None when the model's cuts cannot be listed."""
    try:
        cuts = ui.cuts_of(ref)
    except StitchError as exc:
        ui.show_error(exc)
        return None
    names = [c.name for c in cuts]
    key = f"asm_{'senders' if role == 'a' else 'receivers'}"
    chosen, before = st.session_state.get(key), st.session_state.get(f"_{key}_ref")
    if chosen is None or not set(chosen) <= set(names) or before not in (None, ref):
        st.session_state[key] = [c.name for c in default_cuts(cuts)]  # another model: its default set
    st.session_state[f"_{key}_ref"] = ref
    layouts = {c.name: c.layout for c in cuts}
    label = "Sender cuts of A" if role == "a" else "Receiver cuts of B"
    picked = set(st.multiselect(label, names, key=key,
                                persist_state="session", format_func=lambda n: f"{n} ({layouts[n]})",
                                help="default: 3 feature-map or token cuts spread over depth"))  # fmt: skip
    return tuple(n for n in names if n in picked)


if st.query_params.get("run"):
    _prefill(st.query_params["run"])
elif st.query_params.get("a") or st.query_params.get("b"):
    _prefill_models()
for _key, _value in {"asm_kinds": list(DEFAULT_KINDS), "asm_norms": list(DEFAULTS.norms),
                     "asm_resamples": list(DEFAULTS.resamples), "asm_cls": DEFAULTS.cls_token,
                     "asm_rescale": DEFAULTS.rescale,
                     "asm_epochs": DEFAULTS.epochs, "asm_finetune": False, "asm_max_train": 0}.items():  # fmt: skip
    st.session_state.setdefault(_key, _value)

zoo = sorted(r.summary["ref"] for r in list_zoo_models(ui.get_store()))
left, right = st.columns(2)
senders = receivers = None
with left:
    ref_a = ui.pick_model("a", zoo, 0, prefix="asm_")
    ref_b = ui.pick_model("b", zoo, 1, prefix="asm_")
    if ref_a:
        senders = _cut_picker(ref_a, "a")
    if ref_b:
        receivers = _cut_picker(ref_b, "b")
with right:
    kinds = st.multiselect("Adapter kinds", KINDS, key="asm_kinds", persist_state="session",
                           help="Traft & Cheney's four: linear (1x1 conv), linear_relu, conv3x3_relu, bottleneck; "
                                f"lowrank is Bansal et al.'s. A strided linear one is {HERNANDEZ} (kernel = stride)")
    c = st.columns(2)
    norms = c[0].multiselect("BatchNorm", NORMS, key="asm_norms",
                             persist_state="session", help="both = before and after the adapter")
    resamples = c[1].multiselect("Rescaling", (*RESAMPLES, NO_DOWNSAMPLE), key="asm_resamples",
                                 persist_state="session", format_func=lambda r: RESAMPLE_WORDS.get(r, r),
                                 help="the paper's three: bilinear = Downsample (a bilinear 2x downsample before each "
                                      "adapter), strided = integrated (each adapter strides by 2; a strided linear one "
                                      f"is {HERNANDEZ}), no downsample = No Downsample (the sender's larger map goes "
                                      "on into B, only where B's rest is convolutional up to a global pooling; "
                                      "otherwise skipped with the reason). nearest: upsampling only when chained")  # fmt: skip
    rescale = st.radio("A gap of more than 2x", RESCALES, horizontal=True, key="asm_rescale", persist_state="session",
                       format_func=RESCALE_WORDS.get,
                       help="chained: 8x8 -> 1x1 is three adapters, each halving the grid, so every position counts; "
                            "one-shot (runs before issue 25): one resize by 8, which reads 4 of the 64 positions")
    c = st.columns(2)
    epochs = c[0].number_input("Epochs per adapter", 1, 200, key="asm_epochs", persist_state="session",
                               help="AdamW, lr 2e-3, weight decay 0.05, cosine to 0 (the paper's settings)")
    max_train = c[1].number_input("Max training images (0 = all)", 0, 10**7, key="asm_max_train",
                                  persist_state="session")
    cls_token = st.radio("A ViT receiver's class token", CLS_TOKENS, horizontal=True, key="asm_cls",
                         persist_state="session",
                         format_func={"adapter": "learned by the adapter", "receiver": "B's own (fixed)"}.get,
                         help="learned: the mean of the adapter's patch tokens plus a learned offset; B's own: B's "
                              "class token at the receiving cut, averaged over training images")  # fmt: skip
    finetune = st.checkbox("Also fine-tune each assembled network end to end", key="asm_finetune",
                           persist_state="session",
                           help="train A's bottom, the adapter and B's top together (copies; A and B stay as they are; "
                                "AdamW 5e-4): what the parts can do beyond the adapter. Not the paper's baseline, "
                                "which deletes B's intermediate blocks and tunes at the best of 3 lrs")  # fmt: skip
    models, why_not, dataset, default_data = {}, None, None, None
    for role, ref in (("a", ref_a), ("b", ref_b)):
        if ref:
            try:
                models[role] = ui.load_for_display(ref)
            except Exception as exc:  # noqa: BLE001 - a loader failure is shown, not raised
                ui.show_error(exc, f"loading {ref}")
    if len(models) == 2:
        default_data = default_dataset(models["a"], models["b"])
        dataset = ui.pick_dataset("asm_", default_data)
        why_not = ui.dataset_fit("asm_", dataset, models)


def _use_ranked(top: list[dict]) -> None:
    """"Use these cuts"'s callback (before the pickers are drawn): the top-ranked pairs' cuts."""
    st.session_state["asm_senders"] = list(dict.fromkeys(c["sender"] for c in top))
    st.session_state["asm_receivers"] = list(dict.fromkeys(c["receiver"] for c in top))


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
        c = st.columns([2, 3])
        c[0].button("Use these cuts", key="asm_use_ranked", on_click=_use_ranked, args=(top,),
                    help="the pickers above take the cuts of these pairs (every pair of them is then assembled)")
        c[1].page_link(ui.page_file("similarity"), label="The whole ranking on the Similarity page",
                       query_params={"run": rec.id}, icon=":material/grid_on:")


if len(models) == 2:
    _train_first(ref_a, ref_b, None if dataset == default_data else dataset)

spec = None
if not (ref_a and ref_b):
    why_not = "pick models A and B"
elif len(models) < 2:
    why_not = "a model could not be loaded (above)"
elif not senders or not receivers:
    why_not = "pick at least one cut of A and one of B"
elif not (kinds and norms and resamples):
    why_not = "pick at least one adapter kind, BatchNorm placement and rescaling"
if why_not is None:
    try:
        spec = AssembleSpec(a=ref_a, b=ref_b, senders=senders, receivers=receivers, kinds=tuple(kinds),
                            norms=tuple(norms), resamples=tuple(resamples), cls_token=cls_token, epochs=int(epochs), rescale=rescale,
                            finetune_baseline=finetune, max_train=int(max_train) or None,
                            dataset=None if dataset == default_data else dataset)  # fmt: skip
        st.caption(f"{len(senders)} × {len(receivers)} cut pairs × {len(spec.recipes())} recipes = "
                   f"{len(senders) * len(receivers) * len(spec.recipes())} networks (pairs no adapter can join are "
                   "skipped with the reason).")  # fmt: skip
    except StitchError as exc:
        ui.show_error(exc)
        why_not = "the form has an error (above)"

ui.show_estimate("assemble", spec)
if ui.launch_button("Launch", why_not, key="asm_launch") and spec is not None:
    try:
        job = ui.get_runner().submit("assemble", spec)
    except StitchError as exc:
        ui.show_error(exc)
    else:
        st.query_params.from_dict({"run": job.id})

ui.rerun_when_jobs_finish()  # a model trained meanwhile shows up in the pickers
if st.query_params.get("run"):
    st.divider()
    rec = ui.get_store().lookup(st.query_params["run"])
    if rec is None:
        st.error(f"No run {ui.quote(st.query_params['run'])} in the store.")
    elif rec.kind != "assemble":
        st.info(f"Run {ui.code_span(rec.id)} is a {ui.plain(rec.kind)} run, not an assembly.")
        st.page_link(ui.page_file("results"), label="Open it on Results", query_params={"run": rec.id})
    else:
        st.caption(explain("accuracy"))  # the number every point, bar and heat-map cell below shows
        run_views.assemble_view(rec, key="asm")
        cells = rec.summary.get("cells") or assembled_cells(ui.get_store(), rec.id)  # done, or the cells so far
        if cells:
            st.subheader("Every network")
            st.caption("Accuracy and penalty (B alone minus the network) with their 95% intervals over the test "
                       "images (the penalty's paired: both scored on the same images; runs stored before issue 39 "
                       "have none), the whole network's multiply-adds, and the adapter's parameters beside them: "
                       "recipes compared here are not of one size (a strided linear adapter is a patch "
                       "convolution, kernel x kernel times a 1x1 one's weights).")  # fmt: skip
            st.dataframe(cell_rows(cells), hide_index=True, width="stretch", key="asm-cells")
