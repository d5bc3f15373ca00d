"""Similarity: stitching heat maps over every layer pair, with controls, beside CKA.

``?run=<matrix run id>`` (and ``&cka=<similarity run id>``) shows a launched pair; without ``&cka=`` the
similarity run launched with the matrix (``similarity_beside``: its measure is not in the matrix's spec);
the heat maps fill in while the matrix job runs; ``?run=<similarity run id>`` shows that run alone.
The matrix form is generated from the matrix kind's declared fields (``ui.spec_form``), so a link may name
any of them: ``?a=REF&b=REF[&dataset=NAME]`` picks the two models (and the data), ``&mode=trained&epochs=5``
sets the form, ``&senders=block1,fc1`` chooses cuts.  What a mode leaves unused the spec says
(``MatrixSpec.unused`` / ``fixed``): those widgets are greyed out.
"""

from __future__ import annotations

import streamlit as st

import ui
from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.dataset_check import default_dataset
from stitchcore.experiments.field_words import field_words
from stitchcore.experiments.matrix import (
    CONTROL_NAMES,
    CONTROLS,
    MATRIX_PRESETS,
    MatrixSpec,
    control_note,
    matrix_mode,
    similarity_beside,
)
from stitchcore.experiments.similarity import SimilaritySpec
from stitchcore.measures.meaning import explain, list_meanings
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.sources.zoo import list_zoo_models
from stitchcore.params import declared, declared_field, form_defaults
from stitchcore.report.figures import MEASURE_TITLES, measure_choices, measure_direction
from ui import spec_form
from views import run_views

KIND, PREFIX = "matrix", "sim_"
PICKERS = {"a": "sim_ref_a", "b": "sim_ref_b", "senders": "sim_cuts_a", "receivers": "sim_cuts_b"}  # their state

RECIPES = ("custom", *MATRIX_PRESETS)  # the "Recipe" picker: a named preset fills the adapter and training fields
RECIPE_WORDS = {"custom": "custom", "hernandez": "Hernandez et al. (the paper's)", "closed-form": "closed form (default)"}

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
    rec = ui.linked_run(run_id, ("matrix", "similarity"), "a matrix")
    if rec is not None and rec.kind == "matrix":
        run_views.matrix_view(rec, key="sim", cka_id=cka_id)
    elif rec is not None:
        run_views.similarity_view(rec, key="sim")


def _beside(params: dict[str, str]) -> None:
    """``?run=``'s similarity measure into the form: the run's own (a similarity run alone), ``&cka=``'s, or the
    similarity run launched with the matrix (opened from Results, a job link, a bare permalink)."""
    store, rec = ui.get_store(), ui.get_store().lookup(params["run"])
    st.session_state["sim_recipe"] = "custom"
    if params.get("cka") or rec.kind == "similarity":
        cka = store.lookup(params.get("cka") or rec.id)
    else:
        try:
            cka = similarity_beside(store, spec_from_record(rec), rec.created)
        except StitchError:  # a record this version cannot read: its own view says why
            cka = None
    st.session_state["sim_cka"] = cka is not None
    if cka is not None and cka.kind == "similarity":
        try:
            st.session_state["sim_measure"] = spec_from_record(cka).measure
        except StitchError:  # a record this version cannot read: its own view says why
            pass


def _apply_recipe() -> None:
    """The "Recipe" picker's callback: a named preset sets the mode, adapter, objective and controls' widgets."""
    name = st.session_state["sim_recipe"]
    if name in MATRIX_PRESETS:
        spec_form.fill(KIND, MATRIX_PRESETS[name], prefix=PREFIX)


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


applied = spec_form.from_link(KIND, prefix=PREFIX, state_keys=PICKERS, related=("similarity",))
if applied is not None:  # a new URL: its cut set, and for a run its similarity measure
    ui.hold_cut_set(PREFIX, applied, from_run="run" in st.query_params)
    if "run" in st.query_params:
        _beside(st.query_params.to_dict())
url_notes = spec_form.show_link_notes(PREFIX, clear=not spec_form.linked(KIND))
for _key, _value in {"sim_mode": form_defaults(KIND)["mode"], "sim_cka": True, "sim_cutset": "all",
                     "sim_measure": "cka-linear", "sim_recipe": "custom"}.items():
    st.session_state.setdefault(_key, _value)  # widgets take their values from here, never twice (the form's: its own)
zoo = sorted(r.summary["ref"] for r in list_zoo_models(ui.get_store()))
left, right = st.columns(2)
with left:
    ref_a = ui.pick_model("a", zoo, 0, prefix="sim_")
    ref_b = ui.pick_model("b", zoo, 1, prefix="sim_")
    cut_names = ui.pick_cut_set(PREFIX, {"a": ref_a, "b": ref_b})  # None: "choose" left a side empty
    senders, receivers = cut_names or (None, None)
with right:
    st.selectbox("Recipe", RECIPES, key="sim_recipe", format_func=RECIPE_WORDS.get, on_change=_apply_recipe,
                 help="a named recipe fills mode, adapter and objective below; Hernandez et al.: a 1x1-conv "
                      "stitch (strided conv to downsample, nearest upsample + 1x1 to upsample) from random "
                      "weights, trained on the task")  # fmt: skip
    words = field_words(KIND, "mode")
    mode = st.radio(words.label, declared_field(KIND, "mode").choices, horizontal=True, key="sim_mode",
                    persist_state="session", help=words.help,
                    format_func=lambda m: m if matrix_mode(m).scores else f"{m} (rank, no scoring)")  # fmt: skip
    unused = MatrixSpec.unused(mode, bool(st.session_state.get("sim_controls")))  # greyed out: the spec's rule
    form = spec_form.widgets(KIND, ("kind", "resample", "init", "norm", "objective", "epochs"), per_row=3,
                             prefix=PREFIX, disabled=unused)  # fmt: skip
    form |= spec_form.widgets(KIND, ("controls",), per_row=1, prefix=PREFIX, disabled=unused)
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
    form |= spec_form.widgets(KIND, ("max_train", "seeds"), per_row=2, prefix=PREFIX, disabled=unused)
    with st.expander("More matrix settings: training, controls, adapter"):
        form |= spec_form.widgets(KIND, [f.key for f in declared(KIND) if not f.role and f.key not in {*form, "mode"}],
                                  per_row=3, prefix=PREFIX, disabled=unused)  # fmt: skip
    models, why_not = _loaded(ref_a, ref_b), None  # why_not: why Launch is disabled
    if models is not None:
        default_data = default_dataset(models["a"], models["b"])
        dataset = ui.pick_dataset("sim_", default_data)
        why_not = ui.dataset_fit("sim_", dataset, models)

specs = None
if models is None:
    why_not = "pick models A and B" if not (ref_a and ref_b) else "a model could not be loaded (above)"
elif cut_names is None:
    why_not = "choose at least one cut of A and one of B"
if why_not is None:
    try:
        data = None if dataset == default_data else dataset  # None: B's own set (the run id as before)
        matrix = spec_form.spec_from_form(KIND, {**form, "mode": mode, **MatrixSpec.fixed(mode)}, a=ref_a, b=ref_b,
                                          senders=senders or None, receivers=receivers or None, dataset=data)
        cka_spec = SimilaritySpec(a=ref_a, b=ref_b, senders=matrix.senders, receivers=matrix.receivers,
                                  measure=measure, dataset=data)
        specs = (matrix, cka_spec if with_cka else None)
    except StitchError as exc:
        spec_form.show_refusal(KIND, exc, prefix=PREFIX)
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
