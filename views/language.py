"""Language models: merge (block substitution) or stitch two GPTs, keep or swap the head, see the loss penalty.

``?run=<id>`` shows a merge, lmstitch or lmdepth run and fills the form with its spec.  Both Launch buttons
say how long the run takes on this machine; char-GPTs training now show their progress here, and the page
reruns when one finishes, so the pickers list it without a reload.
"""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

import ui
from stitchcore.data.text import list_texts
from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.lm import LM_ADAPTER, DepthSpec, LMStitchSpec, MergeSpec
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.lm.parts import lm_shape, merge_layout, stitch_layout
from stitchcore.models.sources.zoo import list_zoo_models
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.stitching.train import OPTIMIZERS
from views import run_views

KINDS = {"Penalty over depth": "lmdepth", "Merge": "merge", "Stitch": "lmstitch"}
D = DepthSpec(a="-", b="-")
HEAD_HELP = "a: preserve A's head (A's wte, wpe and ln_f; the head is tied to wte) · b: B's ln_f and lm_head"
EMBED_HELP = ("whose wte + wpe read the merges' input · tied: the model whose head is used (GPT heads are tied to "
              "wte) · a: always A's (the reading of sweeps stored before this choice) · stitches read A's")
UNTIL_HELP = ("converged: stop when the loss on held-out train text (the last 10% of the training part, never the "
              "validation windows scored here) stops improving by 0.1% over 4 checks 50 steps apart; the steps "
              "are the cap · steps: exactly that many (the reading of runs stored before)")


def _prefill(run_id: str) -> None:
    """A permalink fills the form from its run's spec, once per run id."""
    if st.session_state.get("_lm_prefilled") == run_id:
        return
    st.session_state["_lm_prefilled"] = run_id
    rec = ui.get_store().lookup(run_id)
    if rec is None or rec.kind not in KINDS.values():
        return
    try:
        spec = spec_from_record(rec)
    except StitchError:  # a record this version cannot read: the run's view below says why
        return
    st.session_state.update(lm_kind=next(k for k, v in KINDS.items() if v == rec.kind), lm_pick_a=spec.a,
                            lm_ref_a=spec.a, lm_pick_b=spec.b, lm_ref_b=spec.b, lm_windows=spec.eval_windows,
                            lm_samples=spec.sample_tokens)
    if rec.kind == "merge":
        st.session_state.update(lm_start=spec.start, lm_head=spec.head, lm_embed=spec.embed,
                                lm_end=spec.end if spec.end is not None else -1)
    else:
        st.session_state.update(lm_adapter=spec.adapter_name, lm_init=spec.adapter.init, lm_steps=spec.steps,
                                lm_lr=spec.lr, lm_objective=spec.objective, lm_until=spec.until,
                                lm_best_start=spec.start == "best")
    if rec.kind == "lmstitch":
        st.session_state.update(lm_i=spec.cut_a, lm_j=spec.cut_a if spec.cut_b is None else spec.cut_b,
                                lm_head=spec.head)
    if rec.kind == "lmdepth":
        st.session_state.update(lm_modes=list(spec.modes), lm_heads=list(spec.heads), lm_heatmap=spec.heatmap,
                                lm_depth_embed=spec.embed)


def _train_form() -> None:
    """Train a char-GPT zoo recipe here (a background job; the pickers list it once done), with how long it
    takes on this machine above the button."""
    c = st.columns(6)
    text = c[0].selectbox("Corpus", [*list_texts(), "file:…"], key="lm_train_text", persist_state="session",
                          help="pydoc works offline; tinyshakespeare downloads once")
    path = c[1].text_input("Text file (for file:…)", placeholder="/path/to/text.txt", key="lm_train_path",
                           persist_state="session")
    seed = c[2].number_input("Seed", 0, 10**6, 0, key="lm_train_seed", persist_state="session")
    optimizer = c[3].selectbox("Optimizer", OPTIMIZERS, index=1, key="lm_train_optimizer",
                               persist_state="session")
    epochs = c[4].number_input("Epochs (50 steps each)", 1, 400, ZooRecipe().epochs, key="lm_train_epochs",
                               persist_state="session")
    batch = c[5].number_input("Batch (windows a step)", 1, 1024, ZooRecipe().batch_size, key="lm_train_batch",
                              persist_state="session",
                              help="64 by default; smaller trains faster and worse (a quick classroom model)")
    dataset = f"file:{path.strip()}" if text == "file:…" else text
    recipe = None
    if dataset != "file:":
        try:
            recipe = ZooRecipe(arch="gpt", dataset=dataset, seed=int(seed), optimizer=optimizer, epochs=int(epochs),
                               batch_size=int(batch))
        except StitchError as exc:
            ui.show_error(exc)
    ui.show_estimate("zoo", recipe)
    why = "type the text file's path" if dataset == "file:" else None
    if ui.launch_button("Train char-GPT", why if recipe is None else None, key="lm_train"):
        try:
            job = ui.get_runner().submit("zoo", recipe)
        except StitchError as exc:
            ui.show_error(exc)
        else:
            st.success(f"Training queued: {ui.plain(job.label)} ([follow it](models?{urlencode({'run': job.id})})). "
                       "It shows up in the model lists when done.")
    _training_now()


def _training_now() -> None:
    """Char-GPTs training (or queued) in this server, each with its progress and the time left."""
    runner = ui.get_runner()
    jobs = [s.id for s in runner.list(active_only=True) if ui.watch_kind(s) == "lm_zoo"]
    if not jobs:
        return

    @ui.live_while_running(*jobs)
    def live() -> None:
        for job_id in jobs:
            snap = runner.get(job_id)
            if snap is None or snap.is_final:
                continue
            st.markdown(f"[{ui.plain(snap.label)}]({ui.run_link(snap)})")
            st.progress(snap.progress, text=ui.progress_text(snap))

    live()


def _shape(ref: str) -> dict | None:
    try:
        return lm_shape(ui.load_for_display(ref))
    except Exception as exc:  # noqa: BLE001 - an unexpected loader failure must not kill the page
        ui.show_error(exc, f"loading {ref}")
    return None


def _adapter_widgets() -> dict:
    c = st.columns(5)
    kind = c[0].selectbox("Adapter", ("linear", "lowrank", "mlp"), key="lm_adapter", persist_state="session",
                          help="per token; mlp = linear + a GELU MLP branch starting at zero")
    init = c[1].selectbox("Init", ("lstsq", "random"), key="lm_init",
                          persist_state="session", help="lstsq: least squares A -> B stream")
    steps = c[2].number_input("Training steps (cap)", 0, 20000, key="lm_steps", persist_state="session")
    lr = c[3].number_input("Learning rate", 1e-5, 1.0, format="%.4f", key="lm_lr", persist_state="session")
    objective = c[4].selectbox("Objective", ("task", "match", "kd", "task+0.5*match"), key="lm_objective",
                               persist_state="session")
    c = st.columns(5)
    until = c[0].selectbox("Train until", ("converged", "steps"), key="lm_until", persist_state="session",
                           help=UNTIL_HELP)
    best = c[1].checkbox("Best start (init or identity)", key="lm_best_start", persist_state="session",
                         help="on held-out train text; the identity where widths are equal (then a head-A stitch "
                              "after A's last block is A itself). Off: the init only (the reading of runs stored "
                              "before)")
    spec = AdapterSpec(kind="linear" if kind == "mlp" else kind, norm=LM_ADAPTER.norm, resample="none", init=init)
    return {"adapter": spec, "steps": int(steps), "lr": float(lr), "objective": objective,
            "mlp_hidden": 128 if kind == "mlp" else 0, "until": until, "start": "best" if best else "init"}


def _form(ref_a: str, ref_b: str, sa: dict, sb: dict):
    """The experiment widgets -> (kind, spec) or None."""
    kind = KINDS[st.radio("Experiment", list(KINDS), horizontal=True, key="lm_kind", persist_state="session")]
    n = min(sa["n_layer"], sb["n_layer"])
    for key, top in (("lm_start", n), ("lm_end", n), ("lm_i", sa["n_layer"]), ("lm_j", sb["n_layer"])):
        st.session_state[key] = min(st.session_state[key], top)  # other models may have fewer blocks
    evals = {"eval_windows": int(st.session_state["lm_windows"]), "sample_tokens": int(st.session_state["lm_samples"])}
    if kind == "merge":
        c = st.columns(4)
        start = c[0].number_input("First substituted block (start)", 0, n, key="lm_start",
                                  persist_state="session")
        end = c[1].number_input("End (exclusive; -1 = last block)", -1, n, key="lm_end",
                                persist_state="session")
        head = c[2].radio("Head", ("a", "b"), key="lm_head",
                          persist_state="session", horizontal=True, help=HEAD_HELP)
        embed = c[3].radio("Embeddings (wte, wpe)", ("a", "b"), key="lm_embed",
                           persist_state="session", horizontal=True)
        end = n if end < 0 else int(end)
        layout = merge_layout(sa["n_layer"], sb["n_layer"], int(start), end, head, embed)
        st.markdown(f"Merged model, in order (B's blocks `[{int(start)}, {end})`, half-open):")
        st.code(" → ".join(layout), language=None)
        return kind, MergeSpec(a=ref_a, b=ref_b, start=int(start), end=None if end == n else end, head=head,
                               embed=embed, **evals)
    if kind == "lmstitch":
        c = st.columns(3)
        i = c[0].number_input("A's stream after i blocks (i)", 0, sa["n_layer"], key="lm_i",
                              persist_state="session")
        j = c[1].number_input("B from block j (j)", 0, sb["n_layer"], key="lm_j", persist_state="session")
        head = c[2].radio("Head", ("a", "b"), key="lm_head",
                          persist_state="session", horizontal=True, help=HEAD_HELP)
        if head == "a" and sa["width"] != sb["width"]:
            st.warning(f"Head preservation needs equal widths (A: {sa['width']}, B: {sb['width']}); use head b.")
            return kind, None
        train = _adapter_widgets()
        st.code(" → ".join(stitch_layout(sa["n_layer"], sb["n_layer"], int(i), int(j), head)), language=None)
        return kind, LMStitchSpec(a=ref_a, b=ref_b, cut_a=int(i), cut_b=int(j), head=head, **train, **evals)
    c = st.columns(4)
    modes = c[0].multiselect("Modes", ("merge", "stitch"), key="lm_modes", persist_state="session")
    heads = c[1].multiselect("Heads", ("a", "b"), key="lm_heads", persist_state="session", help=HEAD_HELP)
    embed = c[2].radio("Merge embeddings", ("tied", "a", "b"), key="lm_depth_embed", persist_state="session",
                       horizontal=True, help=EMBED_HELP)
    heat = c[3].checkbox("Heat map: stitch every (i, j), head b", key="lm_heatmap", persist_state="session")
    train = _adapter_widgets() if "stitch" in modes or heat else {}
    return kind, DepthSpec(a=ref_a, b=ref_b, modes=tuple(modes), heads=tuple(heads), heatmap=heat, embed=embed,
                           **train, **evals)


# ------------------------------------------------------------------------------ results


def _results(run_id: str) -> None:
    rec = ui.get_store().lookup(run_id)
    if rec is None:
        st.error(f"No run {ui.quote(run_id)} in the store at {ui.plain(ui.get_store().root)}.")
    elif rec.kind not in KINDS.values():
        st.info(f"Run {ui.code_span(run_id)} is a {ui.plain(rec.kind)} run, not a language-model run.")
        st.page_link(ui.page_file("results"), label="Open it on Results", query_params={"run": run_id})
    else:
        run_views.lm_view(rec, key="lm")


# ------------------------------------------------------------------------------ page

ui.page_setup("Language models")
st.title("Language models: merge and stitch")
st.caption("Join two GPTs between transformer blocks, by substituting B's blocks into A (merge, no new "
           "parameters) or through a per-token adapter (stitch), keep A's head or use B's, and compare validation "
           "losses. Loss penalty = (L − L_base) / L_base in % of the base loss, the base being the model whose head "
           "is used: above 0 the joined model is worse (the GPT-2 report's (L_base − L) / L_base is this with the "
           "sign flipped).")
url_run = st.query_params.get("run")
if url_run:
    _prefill(url_run)
for _key, _value in {"lm_kind": "Penalty over depth", "lm_start": 1, "lm_end": -1, "lm_head": "a", "lm_embed": "a",
                     "lm_i": 1, "lm_j": 1, "lm_modes": ["merge", "stitch"], "lm_heads": ["a", "b"], "lm_heatmap": False,
                     "lm_adapter": "linear", "lm_init": "lstsq", "lm_steps": D.steps, "lm_lr": D.lr,
                     "lm_objective": "task", "lm_windows": D.eval_windows, "lm_samples": D.sample_tokens,
                     "lm_until": D.until, "lm_best_start": D.start == "best", "lm_depth_embed": D.embed}.items():
    st.session_state.setdefault(_key, _value)  # widgets take their values from here, never twice

lm_refs = sorted(r.summary["ref"] for r in list_zoo_models(ui.get_store()) if r.summary.get("input_kind") == "tokens")
# Open until the two models the page joins exist (the first one finishing must not fold it: a changed `expanded`
# folds it in the browser); the user may fold it any time, and a rerun with the same value keeps that.
with st.expander("Train a character-level GPT here", expanded=len(lm_refs) < 2):
    _train_form()
if len(lm_refs) < 2:
    st.info(("No char-GPTs trained yet: train two" if not lm_refs else "One char-GPT trained: train another") +
            " above (e.g. seeds 0 and 1), or type hf: refs (hf:gpt2, hf:/path/to/save_pretrained_dir) below.")
left, right = st.columns(2)
with left:
    ref_a = ui.pick_model("a", lm_refs, 0, prefix="lm_")
    ref_b = ui.pick_model("b", lm_refs, 1, prefix="lm_")
shapes = {role: _shape(ref) for role, ref in (("a", ref_a), ("b", ref_b)) if ref}
with right:
    for role, sh in shapes.items():
        if sh:
            st.caption(ui.plain(f"{role.upper()}: {sh['n_layer']} blocks, width {sh['width']}, context "
                                f"{sh['context']} ({sh['family']})"))
    c = st.columns(2)
    c[0].number_input("Validation windows", 1, 4096, key="lm_windows", persist_state="session")
    c[1].number_input("Sample tokens", 0, 1000, key="lm_samples", persist_state="session")

spec = kind = None
if ref_a and ref_b and shapes.get("a") and shapes.get("b"):
    try:
        kind, spec = _form(ref_a, ref_b, shapes["a"], shapes["b"])
    except StitchError as exc:
        ui.show_error(exc)
ui.show_estimate(kind, spec)
if st.button("Launch", type="primary", disabled=spec is None or ui.viewer_mode(), key="lm_launch"):
    try:
        job = ui.get_runner().submit(kind, spec)
    except StitchError as exc:
        ui.show_error(exc)
    else:
        st.query_params["run"] = job.id
        st.session_state["_lm_prefilled"] = job.id
        url_run = job.id
if url_run:
    st.divider()
    _results(url_run)
ui.rerun_when_jobs_finish(("lm_zoo",))  # a char-GPT that finishes training shows up in the pickers
