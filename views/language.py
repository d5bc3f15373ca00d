"""Language models: merge (block substitution) or stitch two GPTs, keep or swap the head, see the loss penalty.

The form is generated from the kinds' declared fields (``ui.spec_form``).  ``?run=<id>`` shows a merge, lmstitch
or lmdepth run and fills the form with its spec; a link may name the experiment and its fields
(``?experiment=lmstitch&cut_a=2&steps=500``).  Both Launch buttons say how long the run takes here; char-GPTs
training show their progress, and the page reruns when one finishes, so the pickers list it.
"""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

import ui
from stitchcore.data.text import list_texts
from stitchcore.errors import StitchError
from stitchcore.experiments.field_words import field_words
from stitchcore.experiments.lm import MODES
from stitchcore.experiments.lm.fields import LM_TRAIN
from stitchcore.lm.parts import lm_shape, merge_layout, stitch_layout
from stitchcore.lm.cross import cross_layout
from stitchcore.models.archs import arch_recipe_defaults
from stitchcore.models.sources.zoo import list_zoo_models
from stitchcore.params import declared, form_defaults
from ui import spec_form
from views import run_views

KINDS = {"Penalty over depth": "lmdepth", "Merge": "merge", "Stitch": "lmstitch"}  # widget keys: "{kind}_{field}"
PICKERS = {"a": "lm_ref_a", "b": "lm_ref_b"}  # the model pickers' text fields (ui.pick_model) hold a link's refs
BLOCKS = {"merge": ("start", "end"), "lmstitch": ("cut_a", "cut_b", "head_at"), "lmdepth": ()}  # drawn here
SCORING = ("eval_windows", "sample_tokens")  # beside the models' shapes
MAIN = ("modes", "heads", "heatmap", "embed", "head", "kind", "init", "objective", "steps", "until", "start", "lr",
        "mlp_hidden")  # fmt: skip
TRAIN = {f.key for f in LM_TRAIN}  # the adapter's training: unused by a depth sweep of merges alone
TRAIN_GPT = ("seed", "optimizer", "epochs", "batch_size", "tokenizer")  # the GPT recipe's fields drawn here


def _train_form() -> None:
    """Train a GPT zoo recipe (characters or a BPE) here (a background job), with how long it takes above the button."""
    c, own = st.columns([1, 2]), arch_recipe_defaults("gpt")
    text = c[0].selectbox("Corpus", [*list_texts(), "file:…"], key="lm_train_text", persist_state="session",
                          help="pydoc works offline; tinyshakespeare downloads once")  # fmt: skip
    path = c[1].text_input("Text file (for file:…)", placeholder="/path/to/text.txt", key="lm_train_path",
                           persist_state="session")  # fmt: skip
    for key, value in own.items():  # a char-GPT's own training defaults (AdamW), then the zoo's
        st.session_state.setdefault(f"lm_train_{key}", value)
    values = spec_form.widgets("zoo", TRAIN_GPT, prefix="lm_train_")
    dataset, recipe = f"file:{path.strip()}" if text == "file:…" else text, None
    if dataset != "file:":
        try:
            recipe = spec_form.spec_from_form("zoo", values, arch="gpt", dataset=dataset)
        except StitchError as exc:
            spec_form.show_refusal("zoo", exc, prefix="lm_train_")
    ui.show_estimate("zoo", recipe)
    why = None if recipe else ("type the text file's path" if dataset == "file:" else "the recipe has an error")
    if ui.launch_button("Train GPT", why, key="lm_train"):
        try:
            job = ui.get_runner().submit("zoo", recipe)
        except StitchError as exc:
            ui.show_error(exc)
        else:
            st.success(f"Training queued: {ui.plain(job.label)} ([follow it](models?{urlencode({'run': job.id})})). "
                       "It shows up in the model lists when done.")
    runner = ui.get_runner()  # char-GPTs training (or queued) in this server, each with its progress
    jobs = [s.id for s in runner.list(active_only=True) if ui.watch_kind(s) == "lm_zoo"]

    @ui.live_while_running(*jobs)
    def live() -> None:
        for snap in filter(lambda s: s is not None and not s.is_final, map(runner.get, jobs)):
            st.markdown(f"[{ui.plain(snap.label)}]({ui.run_link(snap)})")
            st.progress(snap.progress, text=ui.progress_text(snap))

    if jobs:
        live()


def _shape(ref: str) -> dict | None:
    try:
        return lm_shape(ui.load_for_display(ref))
    except Exception as exc:  # noqa: BLE001 - an unexpected loader failure must not kill the page
        ui.show_error(exc, f"loading {ref}")
    return None


def _blocks(kind: str, tops: dict[str, int], off: tuple[str, ...]) -> dict[str, int | None]:
    """The fields that count blocks, in one row, each at most its model's depth (other models may have fewer
    blocks); one whose default is None (``end``: to the last block) may be left empty."""
    own, out = form_defaults(kind), {}
    for where, key in zip(st.columns(4) if BLOCKS[kind] else (), BLOCKS[kind], strict=False):
        state, words = f"{kind}_{key}", field_words(kind, key)
        if st.session_state.setdefault(state, own[key]) is not None:
            st.session_state[state] = min(int(st.session_state[state]), tops[key])
        out[key] = where.number_input(words.label, 0, tops[key], None if own[key] is None else "min", key=state,
                                      help=words.help, disabled=key in off, persist_state="session")
    return out


def _form(kind: str, refs: dict[str, str], sa: dict, sb: dict, values: dict):
    """The experiment's widgets -> its spec, or None with the reason shown (``values``: the scoring's)."""
    p, state, n, given = f"{kind}_", st.session_state, min(sa["n_layer"], sb["n_layer"]), dict(refs)
    modes = state.get(p + "modes", MODES)  # what says which fields are used is read before it is drawn
    trains = kind == "lmstitch" or kind == "lmdepth" and ("stitch" in modes or state.get(p + "heatmap", False))
    tops = {"start": n, "end": n, "cut_a": sa["n_layer"], "cut_b": sb["n_layer"], "head_at": sb["n_layer"]}
    values |= _blocks(kind, tops, off=() if state.get(p + "head") == "a" else ("head_at",))
    if kind == "lmdepth" and state.get(p + "splits") is not None:  # a link's or a run's: no widget draws it yet
        given["splits"] = state[p + "splits"]
        st.caption(f"Splits {', '.join(map(str, given['splits']))}, as the link says")
    keys = [f.key for f in declared(kind) if (not f.role or f.key == "text")
            and f.key not in (*BLOCKS[kind], *SCORING, "splits") and (trains or f.key not in TRAIN)]
    values |= spec_form.widgets(kind, [k for k in keys if k in MAIN], prefix=p)
    with st.expander("More settings"):  # the stopping rule's settings are unused (and not in the spec) by steps
        off = () if state.get(p + "until", "converged") == "converged" else ("check_every", "patience", "tol")
        values |= spec_form.widgets(kind, [k for k in keys if k not in MAIN], prefix=p, disabled=off)
    given["text"] = values.pop("text", None) or None  # an emptied corpus: A's, as untouched
    if kind == "merge":
        start, end = values["start"], n if values["end"] is None else values["end"]
        values["end"] = None if end == n else end  # the last block: "to the end" (the run id as before)
        st.markdown(f"Merged model, in order (B's blocks `[{start}, {end})`, half-open):")
        st.code(" → ".join(merge_layout(sa["n_layer"], sb["n_layer"], start, end, values["head"], values["embed"])),
                language=None)
    elif kind == "lmstitch":
        if values["head"] == "a" and sa["width"] != sb["width"]:
            st.warning(f"Head preservation needs equal widths (A: {sa['width']}, B: {sb['width']}); use head b.")
            return None
        values["head_at"] = values["head_at"] if values["head"] == "a" else None
        i, j = values["cut_a"], values["cut_a"] if values["cut_b"] is None else values["cut_b"]
        across = sa["vocab"] != sb["vocab"]  # each of B's tokens reads A's of the same bytes (stitchcore.lm.cross)
        st.code(" → ".join(cross_layout(sa["n_layer"], sb["n_layer"], i, j, values["alignment"]) if across else
                           stitch_layout(sa["n_layer"], sb["n_layer"], i, j, values["head"], values["head_at"])),
                language=None)  # fmt: skip
        if across:
            st.caption("A and B tokenize differently: scored in bits per byte of B's next-token loss, beside B alone, "
                       "a shuffled alignment and a random-init A (each fitted and trained as the stitch is).")
    return spec_form.spec_from_form(kind, values, **given)


# ------------------------------------------------------------------------------ page

ui.page_setup("Language models")
st.title("Language models: merge and stitch")
st.caption("Join two GPTs between transformer blocks, by substituting B's blocks into A (merge, no new "
           "parameters) or through a per-token adapter (stitch), keep A's head or use B's, and compare validation "
           "losses. Loss penalty = (L − L_base) / L_base in % of the base loss, the base being the model whose head "
           "is used: above 0 the joined model is worse (the GPT-2 report's (L_base − L) / L_base is this with the "
           "sign flipped).")
params = st.query_params.to_dict()
_kind, applied = spec_form.from_link_any(KINDS.values(), KINDS[st.session_state.get("lm_kind", next(iter(KINDS)))],
                                         state_keys=PICKERS, picker_prefix="lm_")  # fmt: skip
if applied:  # the experiment picker follows the link
    st.session_state["lm_kind"] = next(label for label, k in KINDS.items() if k == _kind)

lm_refs = sorted(r.summary["ref"] for r in list_zoo_models(ui.get_store()) if r.summary.get("input_kind") == "tokens")
# Open until the two models the page joins exist (the first one finishing must not fold it: a changed `expanded`
# folds it in the browser); the user may fold it any time, and a rerun with the same value keeps that.
with st.expander("Train a GPT here (one token a character, or a BPE)", expanded=len(lm_refs) < 2):
    _train_form()
if len(lm_refs) < 2:
    st.info(("No GPTs trained yet: train two" if not lm_refs else "One GPT trained: train another") +
            " above (e.g. seeds 0 and 1), or type hf: refs (hf:gpt2, hf:/path/to/save_pretrained_dir) below.")
kind = KINDS[st.radio("Experiment", list(KINDS), horizontal=True, key="lm_kind", persist_state="session")]
url_notes = spec_form.show_link_notes(f"{kind}_", clear=not spec_form.linked(KINDS.values()))
left, right = st.columns(2)
with left:
    ref_a = ui.pick_model("a", lm_refs, 0, prefix="lm_")
    ref_b = ui.pick_model("b", lm_refs, 1, prefix="lm_")
shapes = {role: _shape(ref) for role, ref in (("a", ref_a), ("b", ref_b)) if ref}
with right:
    for role, sh in shapes.items():
        if sh:
            st.caption(ui.plain(f"{role.upper()}: {sh['n_layer']} blocks, width {sh['width']}, context "
                                f"{sh['context']} ({sh['family']}), tokens: {sh['tokens']}"))
    scoring = spec_form.widgets(kind, SCORING, per_row=2, prefix=f"{kind}_")

spec = None
if ref_a and ref_b and shapes.get("a") and shapes.get("b"):
    try:
        spec = _form(kind, {"a": ref_a, "b": ref_b}, shapes["a"], shapes["b"], scoring)
    except StitchError as exc:
        spec_form.show_refusal(kind, exc, prefix=f"{kind}_")
if url_notes and spec is not None:
    st.caption(f":material/warning: Launch runs the form as shown: {len(url_notes)} value(s) of the link were "
               "changed (see the warning above).")
ui.show_estimate(kind, spec)
why_not = "pick models A and B" if not (ref_a and ref_b) else "the form has an error (above)"
if ui.launch_button("Launch", None if spec else why_not, key="lm_launch"):
    try:
        job = ui.get_runner().submit(kind, spec)
    except StitchError as exc:
        ui.show_error(exc)
    else:
        st.query_params.from_dict({"run": job.id})
        st.session_state[f"_{kind}_prefilled"] = repr(sorted({"run": job.id}.items()))  # the form is its spec
        params = {"run": job.id}
if params.get("run"):
    st.divider()
    rec = ui.linked_run(params["run"], tuple(KINDS.values()), "a language-model run")
    if rec is not None:
        run_views.lm_view(rec, key="lm")
ui.rerun_when_jobs_finish(("lm_zoo",))  # a char-GPT that finishes training shows up in the pickers
