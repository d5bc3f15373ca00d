"""Similarity: stitching heat maps over every layer pair, with controls, beside CKA.

``?run=<matrix run id>`` (and ``&cka=<similarity run id>``) shows a launched pair;
the heat maps fill in while the matrix job runs.
"""

from __future__ import annotations

import json

import streamlit as st

import ui
from stitchcore import plots
from stitchcore.errors import StitchError
from stitchcore.experiments.matrix import MatrixSpec
from stitchcore.experiments.similarity import SimilaritySpec
from stitchcore.sources.zoo import list_zoo_models

ui.page_setup("Similarity")
st.title("Similarity matrices")
st.caption(
    "Cell (i, j): how well A's layer i can feed B's layer j through a linear adapter (Hernandez, Dangovski "
    "& Lu; Bansal et al.), beside linear CKA of the same two layers. Rows are A's cuts, columns B's, in "
    "execution order."
)


def _partial_cells(run_id: str) -> list[dict]:
    """Cells a running matrix has finished so far (its cells.json artifact), else []."""
    try:
        return json.loads(ui.get_store().artifact_path(run_id, "cells.json").read_text())
    except (StitchError, OSError, ValueError):
        return []


def _grid(cells: list[dict], senders: list[str], receivers: list[str], variant: str = "trained") -> list:
    values = {(c["sender"], c["receiver"]): c.get("accuracy") for c in cells if c.get("variant", "trained") == variant}
    return [[values.get((s, r)) for r in receivers] for s in senders]


def _matrix_panels(run_id: str, cka_id: str | None) -> None:
    runner = ui.get_runner()
    snap = runner.get(run_id)
    if snap is None:
        st.error(f"No matrix run {run_id!r} in the store.")
        return
    active = not snap.is_final

    @st.fragment(run_every=ui.POLL_SECONDS if active else None)
    def live() -> None:
        now = runner.get(run_id) or snap
        if active and now.is_final:
            st.rerun()
        st.markdown(f"#### {ui.md_text(now.label)}")
        if not now.is_final:
            cols = st.columns([5, 1])
            cols[0].progress(now.progress, text=now.message or now.state)
            if cols[1].button("Stop", key=f"sim-stop-{run_id}", disabled=ui.viewer_mode()):
                runner.cancel(run_id)
        elif now.state != "done":
            st.warning(f"The matrix run is {now.state} ({now.error}); finished cells are kept and a re-launch "
                       "resumes from them.")
        spec = MatrixSpec.from_dict(ui.get_store().lookup(run_id).spec)
        s = now.summary or {}
        cells = _partial_cells(run_id)
        try:  # the full grid from the start, so cells fill in where they belong
            senders = s.get("senders") or list(spec.senders or [c.name for c in ui.cuts_of(spec.a)])
            receivers = s.get("receivers") or list(spec.receivers or [c.name for c in ui.cuts_of(spec.b)])
        except StitchError:
            senders = list(dict.fromkeys(c["sender"] for c in cells))
            receivers = list(dict.fromkeys(c["receiver"] for c in cells))
        if not senders:
            st.caption("Waiting for the first cells…")
            return
        # (title, values [rows x cols], row names, column names, diverging colour scale)
        panels = [("Stitching accuracy", s.get("values") or _grid(cells, senders, receivers), senders, receivers,
                   False)]
        controls = s.get("controls") or {}
        if controls.get("random_sender"):
            panels.append(("Control: random sender", controls["random_sender"], senders, receivers, False))
        if s.get("debiased"):
            panels.append(("Debiased (trained − control)", s["debiased"], senders, receivers, True))
        cka = runner.get(cka_id) if cka_id else None
        if cka is not None and cka.summary:
            k = cka.summary
            panels.append(("Linear CKA", k["values"], k["senders"], k["receivers"], False))
            if k.get("baseline"):
                panels.append(("CKA, shuffled inputs (baseline)", k["baseline"], k["senders"], k["receivers"], False))
        elif cka is not None:
            st.caption(f"CKA: {cka.state} {cka.message}")
        cols = st.columns(min(len(panels), 2))
        for i, (title, values, rows, columns, diverging) in enumerate(panels):
            fig = plots.heatmap(values, rows, columns, title=title, diverging=diverging,
                                zmin=None if diverging else 0.0, zmax=None if diverging else 1.0)
            cols[i % len(cols)].plotly_chart(fig, key=f"heat-{i}-{run_id}")
        if s.get("skipped"):
            with st.expander(f"{len(s['skipped'])} pair(s) skipped"):
                for pair, why in s["skipped"].items():
                    st.markdown(f"- `{pair}`: {why}")
        if now.state == "done":
            _open_in_stitch(spec, senders, receivers)

    live()


def _open_in_stitch(spec: MatrixSpec, senders: list[str], receivers: list[str]) -> None:
    """Open one cell as a full stitch (train the adapter, per-class accuracy ...) on the Stitch page."""
    c = st.columns([2, 2, 3])
    sender = c[0].selectbox("Sender (A)", senders, key="cell_sender")
    receiver = c[1].selectbox("Receiver (B)", receivers, key="cell_receiver")
    params = {"a": spec.a, "b": spec.b, "cut_a": sender, "cut_b": receiver, "init": "lstsq"}
    c[2].page_link("views/stitch.py", label="Open this cell on the Stitch page", query_params=params,
                   icon=":material/cable:")


def _prefill(run_id: str) -> None:
    """A permalink fills the form with its matrix spec, once per run id."""
    if st.session_state.get("_sim_prefilled") == run_id:
        return
    st.session_state["_sim_prefilled"] = run_id
    rec = ui.get_store().lookup(run_id)
    if rec is None or rec.kind != "matrix":
        return
    spec = MatrixSpec.from_dict(rec.spec)
    st.session_state.update(
        sim_pick_a=spec.a, sim_ref_a=spec.a, sim_pick_b=spec.b, sim_ref_b=spec.b, sim_mode=spec.mode,
        sim_epochs=spec.epochs, sim_controls=spec.controls, sim_max_train=spec.max_train or 0,
        sim_cka=bool(st.query_params.get("cka")),
    )


if st.query_params.get("run"):
    _prefill(st.query_params["run"])
for _key, _value in dict(sim_mode="closed-form", sim_epochs=3, sim_controls=False, sim_cka=True,
                         sim_max_train=0).items():
    st.session_state.setdefault(_key, _value)  # widgets take their values from here, never twice
zoo = sorted(r.summary["ref"] for r in list_zoo_models(ui.get_store()))
left, right = st.columns(2)
with left:
    ref_a = ui.pick_model("a", zoo, 0, prefix="sim_")
    ref_b = ui.pick_model("b", zoo, 1, prefix="sim_")
with right:
    mode = st.radio("Mode", ("closed-form", "trained"), horizontal=True, key="sim_mode",
                    help="closed-form: ridge least-squares fit per cell (seconds); trained: then train each cell")
    epochs = st.number_input("Epochs (trained mode)", 1, 100, key="sim_epochs")
    controls = st.checkbox("Controls (random sender / receiver / both; zoo models)", key="sim_controls")
    with_cka = st.checkbox("Linear CKA beside it", key="sim_cka")
    max_train = st.number_input("Max training images (0 = all)", 0, 10**7, key="sim_max_train")

specs = None
if ref_a and ref_b:
    try:
        matrix = MatrixSpec(a=ref_a, b=ref_b, mode=mode, epochs=int(epochs), controls=controls,
                            max_train=int(max_train) or None)
        specs = (matrix, SimilaritySpec(a=ref_a, b=ref_b) if with_cka else None)
    except StitchError as exc:
        ui.show_error(exc)

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
    _matrix_panels(st.query_params["run"], st.query_params.get("cka"))
