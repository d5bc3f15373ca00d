"""Similarity: stitching heat maps over every layer pair, with controls, beside CKA.

``?run=<matrix run id>`` (and ``&cka=<similarity run id>``) shows a launched pair; without ``&cka=`` the
similarity run launched with the matrix (``similarity_beside``: its measure is not in the matrix's spec);
the heat maps fill in while the matrix job runs; ``?run=<similarity run id>`` shows that run alone.
``?a=REF&b=REF[&dataset=NAME]`` picks the two models (and the data).
"""

from __future__ import annotations

import streamlit as st

import ui
from stitchcore.cuts import coarse_cuts
from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.dataset_check import default_dataset
from stitchcore.experiments.matrix import (
    CONTROL_NAMES,
    CONTROLS,
    MATRIX_PRESETS,
    MAX_SEEDS,
    MODES,
    MatrixSpec,
    control_note,
    preset_fields,
    similarity_beside,
)
from stitchcore.experiments.similarity import SimilaritySpec
from stitchcore.measures.meaning import explain, list_meanings
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.sources.zoo import list_zoo_models
from stitchcore.report.figures import MEASURE_TITLES, measure_choices, measure_direction
from stitchcore.stitching.adapter_kinds import list_adapters
from stitchcore.stitching.adapters import INITS, NORMS, RESAMPLES, AdapterSpec
from views import run_views

CUT_SETS = ("all", "coarse", "choose")  # every block-level cut | a few spread over depth | picked by hand
COARSE_CUTS = 6  # cuts per model in the coarse set
RECIPES = ("custom", *MATRIX_PRESETS)  # the "Recipe" picker: a named preset fills the adapter and training fields
RECIPE_WORDS = {"custom": "custom", "hernandez": "Hernandez et al. (the paper's)", "closed-form": "closed form (default)"}
OBJECTIVE_WORDS = {"task": "task", "match": "copy (MSE)"}  # match: MSE to B's own activation (the copy task)

ui.page_setup("Similarity")
st.title("Similarity matrices")
st.caption(
    "Cell (i, j): how well A's layer i can feed B's layer j through a linear adapter (Hernandez, Dangovski "
    "& Lu; Bansal et al.), beside a representation-similarity measure (CKA, Procrustes, RSA, SVCCA, "
    "ridge R², k-NN Jaccard) of the same two layers, calibrated against random-init networks of B's architecture "
    "(a switch shows the raw values). Rows are A's cuts, columns B's, in execution order."
)


def _measure_words(measure: str) -> str:
    """One line on a measure: what it means (measures/meaning.py), else its registered direction and range."""
    if measure in list_meanings():
        return explain(measure)
    return f"{MEASURE_TITLES.get(measure, measure)}: {measure_direction(measure)}."


def _show_run(run_id: str, cka_id: str | None) -> None:
    """``?run=``: a matrix (with the CKA run of ``&cka=`` beside it), or a similarity run alone."""
    rec = ui.get_store().lookup(run_id)
    if rec is None:
        st.error(f"No matrix run {ui.quote(run_id)} in the store.")
    elif rec.kind == "matrix":
        run_views.matrix_view(rec, key="sim", cka_id=cka_id)
    elif rec.kind == "similarity":
        run_views.similarity_view(rec, key="sim")
    else:
        st.info(f"Run {ui.code_span(run_id)} is a {ui.plain(rec.kind)} run, not a matrix.")
        st.page_link(ui.page_file("results"), label="Open it on Results", query_params={"run": run_id})


def _prefill(run_id: str) -> None:
    """A permalink fills the form with its matrix (and CKA) spec, or its similarity spec, once per run id."""
    if st.session_state.get("_sim_prefilled") == run_id:
        return
    st.session_state["_sim_prefilled"] = run_id
    rec = ui.get_store().lookup(run_id)
    if rec is None or rec.kind not in ("matrix", "similarity"):
        return
    try:
        spec = spec_from_record(rec)
    except StitchError:  # a record this version cannot read: the run's view below says why
        return
    chosen = spec.senders is not None or spec.receivers is not None
    st.session_state.update(sim_pick_a=spec.a, sim_ref_a=spec.a, sim_pick_b=spec.b, sim_ref_b=spec.b,
                            sim_cutset="choose" if chosen else "all", sim_dataset=spec.dataset)  # fmt: skip
    if chosen:  # one side may still be every cut (None): the multiselect then holds all of that model's cuts
        for role, ref, cuts in (("a", spec.a, spec.senders), ("b", spec.b, spec.receivers)):
            st.session_state[f"sim_cuts_{role}"] = list(cuts) if cuts is not None else _every_cut(ref)
    if rec.kind == "similarity":
        st.session_state.update(sim_cka=True, sim_measure=spec.measure)
        return
    cka_id = st.query_params.get("cka")
    # no &cka= (opened from Results, a job link, a bare permalink): the similarity run launched with the matrix
    cka = ui.get_store().lookup(cka_id) if cka_id else similarity_beside(ui.get_store(), spec, rec.created)
    st.session_state.update(sim_mode=spec.mode, sim_epochs=spec.epochs, sim_seeds=spec.seeds, sim_controls=spec.controls,
                            sim_max_train=spec.max_train or 0, sim_cka=cka is not None, sim_recipe="custom",
                            **_adapter_state(spec.adapter, spec.objective))  # fmt: skip
    if cka is not None and cka.kind == "similarity":
        try:
            st.session_state["sim_measure"] = spec_from_record(cka).measure
        except StitchError:  # a record this version cannot read: its own view says why
            pass


def _adapter_state(adapter: AdapterSpec, objective: str) -> dict[str, str]:
    """The form's adapter and objective widgets' values for ``adapter`` (a preset's, or a run's)."""
    return {"sim_adapter": adapter.kind, "sim_norm": adapter.norm, "sim_resample": adapter.resample,
            "sim_init": adapter.init, "sim_objective": objective}  # fmt: skip


def _apply_recipe() -> None:
    """The "Recipe" picker's callback: a named preset sets the mode, adapter and objective widgets."""
    name = st.session_state["sim_recipe"]
    if name in MATRIX_PRESETS:
        fields = preset_fields(name)
        st.session_state.update(sim_mode=fields["mode"], **_adapter_state(fields["adapter"], fields["objective"]))


def _every_cut(ref: str) -> list[str]:
    """Every cut name of a model, in execution order ([] when it cannot be loaded: the page says why)."""
    try:
        return [c.name for c in ui.cuts_of(ref)]
    except StitchError:
        return []


def _cut_set(ref: str, role: str, how: str) -> tuple[str, ...] | None:
    """The cut names of one model for the chosen cut set (None = every cut, also when "choose" picks them
    all, so the run is the same as "all"'s); a multiselect for "choose"."""
    if how == "all":
        return None
    try:
        cuts = ui.cuts_of(ref)
    except StitchError as exc:
        ui.show_error(exc)
        return None
    if how == "coarse":
        return tuple(c.name for c in coarse_cuts(cuts, COARSE_CUTS))
    names = [c.name for c in cuts]
    key = f"sim_cuts_{role}"
    if key in st.session_state:
        st.session_state[key] = [n for n in st.session_state[key] if n in names]
    else:
        st.session_state[key] = [c.name for c in coarse_cuts(cuts, COARSE_CUTS)]
    label = "Sender cuts of A (rows)" if role == "a" else "Receiver cuts of B (columns)"
    picked = set(st.multiselect(label, names, key=key, persist_state="session"))
    if picked == set(names):
        return None
    return tuple(n for n in names if n in picked)  # execution order, whatever the click order


def _loaded(ref_a: str | None, ref_b: str | None) -> dict[str, LoadedModel] | None:
    """Both models loaded for display (role -> model), or None while one is missing or fails to load."""
    models = {}
    for role, ref in (("a", ref_a), ("b", ref_b)):
        if ref is None:
            return None
        try:
            models[role] = ui.load_for_display(ref)
        except Exception as exc:  # noqa: BLE001 - a loader failure is shown, not raised
            ui.show_error(exc, f"loading {ref}")
            return None
    return models


def _prefill_models() -> None:
    """``?a=REF&b=REF`` (a link to a model pair) picks the two models, once per pair."""
    pair = (st.query_params.get("a"), st.query_params.get("b"), st.query_params.get("dataset"))
    if st.session_state.get("_sim_pair") == pair:
        return
    st.session_state["_sim_pair"] = pair
    for role, ref in zip("ab", pair[:2], strict=True):
        if ref:
            st.session_state.update({f"sim_pick_{role}": ref, f"sim_ref_{role}": ref})
    st.session_state["sim_dataset"] = pair[2]  # None: the models' own training set


if st.query_params.get("run"):
    _prefill(st.query_params["run"])
elif st.query_params.get("a") or st.query_params.get("b"):
    _prefill_models()
for _key, _value in {"sim_mode": "closed-form", "sim_epochs": 3, "sim_seeds": 1, "sim_controls": False, "sim_cka": True,
                     "sim_max_train": 0, "sim_cutset": "all", "sim_measure": "cka-linear", "sim_recipe": "custom",
                     **_adapter_state(MatrixSpec.__dataclass_fields__["adapter"].default_factory(), "task")}.items():
    st.session_state.setdefault(_key, _value)  # widgets take their values from here, never twice
zoo = sorted(r.summary["ref"] for r in list_zoo_models(ui.get_store()))
left, right = st.columns(2)
with left:
    ref_a = ui.pick_model("a", zoo, 0, prefix="sim_")
    ref_b = ui.pick_model("b", zoo, 1, prefix="sim_")
    cut_set = st.radio("Cuts", CUT_SETS, horizontal=True, key="sim_cutset", persist_state="session",
                       format_func={"all": "all (fine)", "coarse": f"coarse (≤{COARSE_CUTS} each)",
                                    "choose": "choose…"}.get,
                       help="all: every block-level cut; coarse: a few spread over depth; choose: pick them")
    senders = _cut_set(ref_a, "a", cut_set) if ref_a else None
    receivers = _cut_set(ref_b, "b", cut_set) if ref_b else None
with right:
    st.selectbox("Recipe", RECIPES, key="sim_recipe", format_func=RECIPE_WORDS.get, on_change=_apply_recipe,
                 help="a named recipe fills mode, adapter and objective below; Hernandez et al.: a 1x1-conv "
                      "stitch (strided conv to downsample, nearest upsample + 1x1 to upsample) from random "
                      "weights, trained on the task")  # fmt: skip
    mode = st.radio("Mode", MODES, horizontal=True, key="sim_mode", persist_state="session",
                    format_func=lambda m: {"proxy": "proxy (rank, no scoring)"}.get(m, m),
                    help="closed-form: ridge least-squares fit per cell, then its test accuracy (seconds); trained: "
                         "then train each cell; proxy: the fits' held-out R² and CKA alone, nothing scored (a "
                         "fraction of closed-form's time), to rank which pairs to train first")  # fmt: skip
    a1, a2, a3 = st.columns(3)
    kind = a1.selectbox("Adapter", list_adapters(), key="sim_adapter", persist_state="session",
                        help="linear = 1x1 conv / Linear (Bansal et al.; Hernandez et al.)")
    resample = a2.selectbox("Resample", RESAMPLES, key="sim_resample", persist_state="session",
                            help="how a sender's grid meets a receiver's of another size; strided (Hernandez et "
                                 "al.): a strided conv to downsample, nearest upsample + 1x1 conv to upsample")
    init = a3.selectbox("Init", INITS, key="sim_init", persist_state="session",
                        help="lstsq / procrustes: a closed-form fit (closed-form mode needs one); random: "
                             "trained from scratch, as in Hernandez et al.")
    b1, b2, b3 = st.columns(3)
    norm = b1.selectbox("BatchNorm", NORMS, key="sim_norm", persist_state="session")
    objective = b2.selectbox("Objective (trained)", tuple(OBJECTIVE_WORDS), key="sim_objective",
                             persist_state="session", format_func=OBJECTIVE_WORDS.get, disabled=mode != "trained",
                             help="copy: train each adapter to reproduce B's own activation at the receiving "
                                  "cut (Hernandez et al.'s copy task)")  # fmt: skip
    epochs = b3.number_input("Epochs", 1, 100, key="sim_epochs", persist_state="session", disabled=mode == "proxy",
                             help="trained mode, and the controls' task training")
    controls = st.checkbox("Controls (random sender / receiver / both; zoo models)", key="sim_controls",
                           persist_state="session", disabled=mode == "proxy",
                           help="their adapters are task-trained, also in closed-form mode: a closed-form fit "
                                "into a random receiver only copies its activation, which scores chance")
    c1, c2 = st.columns([1, 1])
    with_cka = c1.checkbox("Similarity beside it", key="sim_cka", persist_state="session",
                           help="a similarity measure of the pairs, also of A against "
                                f"{SimilaritySpec.__dataclass_fields__['random_null_seeds'].default} random-init "
                                "networks of B's architecture: its calibrated map says where B's training, not its "
                                "architecture and the inputs, makes B like A")  # fmt: skip
    shown = st.session_state.get("sim_measure")  # the help explains the measure picked (a key keeps the widget)
    measure = c2.selectbox("Measure", measure_choices(), key="sim_measure", persist_state="session",
                           format_func=lambda m: MEASURE_TITLES.get(m, m), disabled=not with_cka,
                           help=_measure_words(shown if shown in measure_choices() else measure_choices()[0]))
    if with_cka:
        st.caption(_measure_words(measure))
    d1, d2 = st.columns(2)
    max_train = d1.number_input("Max training images (0 = all)", 0, 10**7, key="sim_max_train",
                                persist_state="session")
    seeds = d2.number_input("Adapter seeds (trained)", 1, MAX_SEEDS, key="sim_seeds", persist_state="session",
                            disabled=mode != "trained",
                            help="trained mode: train every cell's adapter from this many seeds; each cell then "
                                 "also shows its mean across them with a 95% t-interval (the spread training adds "
                                 "on top of the test images'). Multiplies the training time.")  # fmt: skip
    models, why_not = _loaded(ref_a, ref_b), None  # why_not: why Launch is disabled
    if models is not None:
        default_data = default_dataset(models["a"], models["b"])
        dataset = ui.pick_dataset("sim_", default_data)
        why_not = ui.dataset_fit("sim_", dataset, models)

specs = None
if models is None:
    why_not = "pick models A and B" if not (ref_a and ref_b) else "a model could not be loaded (above)"
elif cut_set == "choose" and (senders == () or receivers == ()):
    why_not = "choose at least one cut of A and one of B"
if why_not is None:
    try:
        data = None if dataset == default_data else dataset  # None: B's own set (the run id as before)
        adapter = AdapterSpec(kind=kind, norm=norm, resample=resample, init=init)
        matrix = MatrixSpec(a=ref_a, b=ref_b, senders=senders or None, receivers=receivers or None, mode=mode,
                            epochs=int(epochs), controls=controls and mode != "proxy",
                            max_train=int(max_train) or None, dataset=data,
                            adapter=adapter, objective=objective if mode == "trained" else "task",
                            seeds=int(seeds) if mode == "trained" else 1)  # fmt: skip
        cka_spec = SimilaritySpec(a=ref_a, b=ref_b, senders=matrix.senders, receivers=matrix.receivers,
                                  measure=measure, dataset=data)
        specs = (matrix, cka_spec if with_cka else None)
    except StitchError as exc:
        ui.show_error(exc)
        why_not = "the form has an error (above)"

if specs is not None and specs[0].controls:  # say, by the controls, whether they can differ from chance
    _notes = {c: control_note(specs[0], c) for c in CONTROLS}
    if all(can for can, _ in _notes.values()):
        st.caption(f"**Controls.** {_notes['random_receiver'][1]}")
    for _control, (_can, _note) in _notes.items():
        if not _can:
            st.warning(f"**Control: {CONTROL_NAMES[_control]}.** {_note}")
ui.show_plan_estimate([(k, s) for k, s in zip(("matrix", "similarity"), specs or ()) if s is not None],
                      form_keys={"epochs": "sim_epochs", "max_train": "sim_max_train"})  # Launch queues both
if ui.launch_button("Launch", why_not, key="sim_launch") and specs is not None:
    try:
        job = ui.get_runner().submit("matrix", specs[0])
        query = {"run": job.id}
        if specs[1] is not None:
            query["cka"] = ui.get_runner().submit("similarity", specs[1]).id
    except StitchError as exc:
        ui.show_error(exc)
    else:
        st.query_params.from_dict(query)

ui.rerun_when_jobs_finish()  # a model trained meanwhile shows up in the pickers
if st.query_params.get("run"):
    st.divider()
    _show_run(st.query_params["run"], st.query_params.get("cka"))
