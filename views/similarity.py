"""Similarity: stitching heat maps over every layer pair, with controls, beside CKA.

``?run=<matrix run id>`` (and ``&cka=<similarity run id>``) shows a launched pair;
the heat maps fill in while the matrix job runs; ``?run=<similarity run id>`` shows that run alone.
``?a=REF&b=REF`` picks the two models.
"""

from __future__ import annotations

import streamlit as st

import ui
from stitchcore.cuts import coarse_cuts
from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.matrix import MatrixSpec, cell_axes, cell_grid, partial_cells
from stitchcore.experiments.similarity import SimilaritySpec
from stitchcore.models.sources.zoo import list_zoo_models
from stitchcore.plots import heatmap as plots_heatmap

CKA_TITLES = {"cka-linear": "Linear CKA", "cka-rbf": "RBF CKA", "procrustes": "Procrustes distance"}
CUT_SETS = ("all", "coarse", "choose")  # every block-level cut | a few spread over depth | picked by hand
COARSE_CUTS = 6  # cuts per model in the coarse set

ui.page_setup("Similarity")
st.title("Similarity matrices")
st.caption(
    "Cell (i, j): how well A's layer i can feed B's layer j through a linear adapter (Hernandez, Dangovski "
    "& Lu; Bansal et al.), beside CKA (or Procrustes distance) of the same two layers. Rows are A's cuts, columns B's, in "
    "execution order."
)


def _cka_panels(cka) -> list[tuple]:
    """The heat map panels of a finished similarity run (its measure, and the shuffled baseline)."""
    k = cka.summary
    name = CKA_TITLES.get(k.get("measure", "cka-linear"), k.get("measure", "similarity"))
    panels = [(name, k["values"], k["senders"], k["receivers"], False, False)]
    if k.get("baseline"):
        panels.append((f"{name}, shuffled inputs (baseline)", k["baseline"], k["senders"], k["receivers"], False,
                       False))  # fmt: skip
    return panels


def _show_run(run_id: str, cka_id: str | None) -> None:
    """``?run=``: a matrix (with the CKA run of ``&cka=`` beside it), or a similarity run alone."""
    rec = ui.get_store().lookup(run_id)
    if rec is None:
        st.error(f"No matrix run {run_id!r} in the store.")
    elif rec.kind == "matrix":
        _matrix_panels(run_id, cka_id)
    elif rec.kind == "similarity":
        _similarity_panels(run_id)
    else:
        st.info(f"Run `{run_id}` is a {rec.kind} run, not a matrix.")
        st.page_link("views/results.py", label="Open it on Results", query_params={"run": run_id})


def _similarity_panels(run_id: str) -> None:
    """A similarity (CKA / Procrustes) run on its own, filling in once it is done."""
    runner = ui.get_runner()
    snap = runner.get(run_id)

    @ui.live_while_running(run_id)
    def live() -> None:
        now = runner.get(run_id) or snap
        st.markdown(f"#### {ui.md_text(now.label)}")
        if not now.is_final:
            ui.progress_with_stop(now, f"sim-stop-{run_id}")
        elif now.state != "done":
            st.warning(f"The similarity run is {now.state} ({now.error}).")
        if now.state != "done" or not now.summary:
            return
        panels = _cka_panels(now)
        cols = st.columns(min(len(panels), 2))
        for i, (title, values, rows, columns, _, _) in enumerate(panels):
            bounded = "rocrustes" not in title
            fig = plots_heatmap.heatmap(values, rows, columns, title=title, zmin=0.0 if bounded else None,
                                        zmax=1.0 if bounded else None, value_label=_value_label(title))
            cols[i % len(cols)].plotly_chart(fig, key=f"cka-{i}-{run_id}")

    live()


def _matrix_panels(run_id: str, cka_id: str | None) -> None:
    runner = ui.get_runner()
    snap = runner.get(run_id)
    if snap is None:
        st.error(f"No matrix run {run_id!r} in the store.")
        return

    @ui.live_while_running(run_id, cka_id)  # until the matrix and the CKA beside it have both ended
    def live() -> None:
        now = runner.get(run_id) or snap
        cka_now = runner.get(cka_id) if cka_id else None
        st.markdown(f"#### {ui.md_text(now.label)}")
        if not now.is_final:
            ui.progress_with_stop(now, f"sim-stop-{run_id}", also_cancel=(cka_id,))  # the CKA beside it too
        elif now.state != "done":
            st.warning(f"The matrix run is {now.state} ({now.error}); finished cells are kept and a re-launch "
                       "resumes from them.")
        spec = spec_from_record(ui.get_store().lookup(run_id))
        s = now.summary or {}
        cells = partial_cells(ui.get_store(), run_id)
        try:  # the full grid from the start, so cells fill in where they belong
            senders = s.get("senders") or list(spec.senders or [c.name for c in ui.cuts_of(spec.a)])
            receivers = s.get("receivers") or list(spec.receivers or [c.name for c in ui.cuts_of(spec.b)])
        except StitchError:
            senders, receivers = cell_axes(cells)
        if not senders:
            st.caption("Waiting for the first cells…")
            return
        metric = st.radio("Stitching panel shows", ("accuracy", "penalty"), horizontal=True, key="sim_metric",
                          help="penalty = B's accuracy − stitched accuracy (Bansal et al.); lower is better")
        # (title, values [rows x cols], row names, column names, diverging colour scale, opens on the Stitch page)
        main = s.get("values" if metric == "accuracy" else "penalty") or cell_grid(cells, senders, receivers,
                                                                                    field=metric)
        panels = [(f"Stitching {metric}", main, senders, receivers, metric == "penalty", True)]
        controls = s.get("controls") or {}
        if controls.get("random_sender"):
            panels.append(("Control: random sender", controls["random_sender"], senders, receivers, False, False))
        if s.get("debiased"):
            panels.append(("Debiased (trained − control)", s["debiased"], senders, receivers, True, False))
        if cka_now is not None and cka_now.summary:
            panels += _cka_panels(cka_now)
        elif cka_now is not None:
            st.caption(f"CKA: {cka_now.state} {cka_now.message}")
        if now.state == "done":
            st.caption("Click a cell of the stitching panel to open that pair on the Stitch page.")
        cols = st.columns(min(len(panels), 2))
        for i, (title, values, rows, columns, diverging, opens) in enumerate(panels):
            bounded = not diverging and "rocrustes" not in title
            fig = plots_heatmap.heatmap(values, rows, columns, title=title, diverging=diverging, clickable=opens,
                                zmin=0.0 if bounded else None, zmax=1.0 if bounded else None,
                                value_label=_value_label(title))
            key = f"heat-{i}-{metric}-{run_id}"
            if opens and now.state == "done":
                event = cols[i % len(cols)].plotly_chart(fig, key=key, on_select="rerun", selection_mode="points")
                _open_selected_cell(spec, event)
            else:
                cols[i % len(cols)].plotly_chart(fig, key=key)
        if s.get("skipped"):
            with st.expander(f"{len(s['skipped'])} pair(s) skipped"):
                for pair, why in s["skipped"].items():
                    st.markdown(f"- `{pair}`: {why}")
        if now.state == "done":
            _open_in_stitch(spec, senders, receivers)

    live()


def _value_label(title: str) -> str:
    """Colour-bar title of a panel (hover uses it too)."""
    for word, label in (("Debiased", "Δ accuracy"), ("penalty", "penalty"), ("Procrustes", "distance"),
                        ("CKA", "CKA")):
        if word in title:
            return label
    return "accuracy"


def _stitch_params(spec: MatrixSpec, sender: str, receiver: str) -> dict[str, str]:
    """Stitch-page query parameters for one cell (the page pre-fills its form from them)."""
    return {"a": spec.a, "b": spec.b, "cut_a": sender, "cut_b": receiver, "init": "lstsq"}


def _open_selected_cell(spec: MatrixSpec, event) -> None:
    """A click on a cell of the stitching panel opens that pair on the Stitch page."""
    for point in (event.selection.points if event is not None else []):
        cell = plots_heatmap.cell_of_point(point)
        if cell is not None:
            st.switch_page("views/stitch.py", query_params=_stitch_params(spec, *cell))


def _open_in_stitch(spec: MatrixSpec, senders: list[str], receivers: list[str]) -> None:
    """The keyboard way to open one cell as a full stitch (train the adapter, per-class accuracy ...)."""
    c = st.columns([2, 2, 3])
    sender = c[0].selectbox("Sender (A)", senders, key="cell_sender")
    receiver = c[1].selectbox("Receiver (B)", receivers, key="cell_receiver")
    c[2].page_link("views/stitch.py", label="Open this cell on the Stitch page",
                   query_params=_stitch_params(spec, sender, receiver), icon=":material/cable:")


def _prefill(run_id: str) -> None:
    """A permalink fills the form with its matrix (and CKA) spec, or its similarity spec, once per run id."""
    if st.session_state.get("_sim_prefilled") == run_id:
        return
    st.session_state["_sim_prefilled"] = run_id
    rec = ui.get_store().lookup(run_id)
    if rec is None or rec.kind not in ("matrix", "similarity"):
        return
    spec = spec_from_record(rec)
    chosen = spec.senders is not None or spec.receivers is not None
    st.session_state.update(sim_pick_a=spec.a, sim_ref_a=spec.a, sim_pick_b=spec.b, sim_ref_b=spec.b,
                            sim_cutset="choose" if chosen else "all")  # fmt: skip
    if chosen:
        st.session_state.update(sim_cuts_a=list(spec.senders or []), sim_cuts_b=list(spec.receivers or []))
    if rec.kind == "similarity":
        st.session_state.update(sim_cka=True, sim_measure=spec.measure)
        return
    st.session_state.update(sim_mode=spec.mode, sim_epochs=spec.epochs, sim_controls=spec.controls,
                            sim_max_train=spec.max_train or 0, sim_cka=bool(st.query_params.get("cka")))
    cka = ui.get_store().lookup(st.query_params.get("cka", "")) if st.query_params.get("cka") else None
    if cka is not None and cka.kind == "similarity":
        st.session_state["sim_measure"] = spec_from_record(cka).measure


def _cut_set(ref: str, role: str, how: str) -> tuple[str, ...] | None:
    """The cut names of one model for the chosen cut set (None = every cut); a multiselect for "choose"."""
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
    picked = set(st.multiselect(label, names, key=key))
    return tuple(n for n in names if n in picked)  # execution order, whatever the click order


def _prefill_models() -> None:
    """``?a=REF&b=REF`` (a link to a model pair) picks the two models, once per pair."""
    pair = (st.query_params.get("a"), st.query_params.get("b"))
    if st.session_state.get("_sim_pair") == pair:
        return
    st.session_state["_sim_pair"] = pair
    for role, ref in zip("ab", pair, strict=True):
        if ref:
            st.session_state.update({f"sim_pick_{role}": ref, f"sim_ref_{role}": ref})


if st.query_params.get("run"):
    _prefill(st.query_params["run"])
elif st.query_params.get("a") or st.query_params.get("b"):
    _prefill_models()
for _key, _value in {"sim_mode": "closed-form", "sim_epochs": 3, "sim_controls": False, "sim_cka": True,
                         "sim_max_train": 0, "sim_cutset": "all", "sim_measure": "cka-linear"}.items():
    st.session_state.setdefault(_key, _value)  # widgets take their values from here, never twice
zoo = sorted(r.summary["ref"] for r in list_zoo_models(ui.get_store()))
left, right = st.columns(2)
with left:
    ref_a = ui.pick_model("a", zoo, 0, prefix="sim_")
    ref_b = ui.pick_model("b", zoo, 1, prefix="sim_")
    cut_set = st.radio("Cuts", CUT_SETS, horizontal=True, key="sim_cutset",
                       format_func={"all": "all (fine)", "coarse": f"coarse (≤{COARSE_CUTS} each)",
                                    "choose": "choose…"}.get,
                       help="all: every block-level cut; coarse: a few spread over depth; choose: pick them")
    senders = _cut_set(ref_a, "a", cut_set) if ref_a else None
    receivers = _cut_set(ref_b, "b", cut_set) if ref_b else None
with right:
    mode = st.radio("Mode", ("closed-form", "trained"), horizontal=True, key="sim_mode",
                    help="closed-form: ridge least-squares fit per cell (seconds); trained: then train each cell")
    epochs = st.number_input("Epochs (trained mode)", 1, 100, key="sim_epochs")
    controls = st.checkbox("Controls (random sender / receiver / both; zoo models)", key="sim_controls")
    c1, c2 = st.columns([1, 1])
    with_cka = c1.checkbox("Similarity beside it", key="sim_cka", help="CKA or Procrustes of the same pairs")
    measure = c2.selectbox("Measure", tuple(CKA_TITLES), key="sim_measure", format_func=CKA_TITLES.get,
                           disabled=not with_cka)
    max_train = st.number_input("Max training images (0 = all)", 0, 10**7, key="sim_max_train")

specs = None
if ref_a and ref_b:
    try:
        matrix = MatrixSpec(a=ref_a, b=ref_b, senders=senders or None, receivers=receivers or None, mode=mode,
                            epochs=int(epochs), controls=controls, max_train=int(max_train) or None)
        cka_spec = SimilaritySpec(a=ref_a, b=ref_b, senders=matrix.senders, receivers=matrix.receivers,
                                  measure=measure)
        specs = (matrix, cka_spec if with_cka else None)
    except StitchError as exc:
        ui.show_error(exc)
    if cut_set == "choose" and not (senders and receivers):
        st.info("Choose at least one cut of A and one of B.")
        specs = None

if st.button("Launch", type="primary", disabled=specs is None or ui.viewer_mode(), key="sim_launch"):
    try:
        job = ui.get_runner().submit("matrix", specs[0])
        query = {"run": job.id}
        if specs[1] is not None:
            query["cka"] = ui.get_runner().submit("similarity", specs[1]).id
    except StitchError as exc:
        ui.show_error(exc)
    else:
        st.query_params.from_dict(query)

if st.query_params.get("run"):
    st.divider()
    _show_run(st.query_params["run"], st.query_params.get("cka"))
