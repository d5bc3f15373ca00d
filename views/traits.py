"""Traits: sweep the cut along depth and see where a trait lives (Oxford stitching report).

``?preset=<name>`` (``&protocol=match&data=mnist5k&seeds=3``) shows a preset's sweeps; ``?run=<sweep run id>``
shows one sweep (filling in while it runs) and fills the "Your own sweep" form with its spec.  That form is
generated from the sweep kind's declared fields (``ui.spec_form``), so a link may name them too
(``?metrics=accuracy,class_acc:3&control=false``).  What a preset's link means, held to what the page offers,
lives in :mod:`stitchcore.experiments.trait_presets.links`; this page only draws.  Presets and the forms
submit background jobs: zoo recipes first, then the sweep.
"""

from __future__ import annotations

import streamlit as st

import ui
from stitchcore.errors import StitchError
from stitchcore.experiments.dataset_check import default_dataset
from stitchcore.experiments.preset_seeds import MAX_SEEDS, across_model_seeds, across_rows, seed_lines
from stitchcore.experiments.trait_presets import (
    SCALES,
    TRAITS,
    Preset,
    links,  # what a preset's link means; the form's adapter recipes
    list_presets,
    missing_weights,
    panel_lines,
    preset_scales,
    trait_recipe,
    weights_words,
    zoo_ref,
)
from stitchcore.measures.intervals import MIN_SEEDS
from stitchcore.measures.traits import parse_metric
from stitchcore.models.sources.zoo import list_zoo_models
from stitchcore.params import declared
from stitchcore.plots import preset_lines
from stitchcore.report.figures import PENALTY_WORDS
from stitchcore.store.results import run_id_for
from ui import spec_form
from views import run_views

KIND, PREFIX = "sweep", "tr_"
PICKERS = {"a": "tr_ref_a", "b": "tr_ref_b", "positions": "_tr_link_positions"}  # held until the cuts are known
# The plain fields under "More": all but the form's first four and those the Adapter recipe sets
MORE = [f.key for f in declared(KIND) if not f.role and not f.name.startswith("adapter.")
        and f.key not in ("positions", "metrics", "control", "simplicity", "epochs")]  # fmt: skip
# Where the form starts other than SweepSpec's defaults (accuracy alone, the adapter on the scored data): the
# Oxford report's setting, class 3's traits read by an adapter that never sees a 3.  Then the recipe builder's.
STARTING = {"tr_metrics": "accuracy, class_acc:3, confusion:3->8", "tr_train_data": "digits|drop3", "tr_arch": "cnn",
            "tr_trait_a": "relabel", "tr_trait_b": "plain", "tr_layer": "fc1", "tr_x": 3, "tr_y": 8}  # fmt: skip

ui.page_setup("Traits")
st.title("Traits along depth")
st.caption(
    "C = B after the cut ∘ adapter ∘ A up to the cut, at every depth. Where a trait of A or B shows up in C "
    "locates it; the random-init control (two untrained twins stitched the same way) shows what the adapter "
    "alone can do."
)


def _submit(jobs: list[tuple[str, object]]) -> str | None:
    """Queue (kind, spec) jobs in order (one CPU worker runs them in order); returns the last id."""
    try:
        return [ui.get_runner().submit(kind, spec).id for kind, spec in jobs][-1]
    except StitchError as exc:
        ui.show_error(exc)
        return None


# ---------------------------------------------------------------------------- presets

url = links.read_preset_link(st.query_params.to_dict())  # its protocol, data and seeds, held to what is offered
protocol, scale = url.protocol, url.scale
for _note in url.notes:
    st.warning(ui.plain(_note), icon=":material/warning:")
st.session_state.setdefault("tr_model_seeds", url.seeds)  # a link's seeds, once; then the widget's own
n_seeds = int(st.columns([1, 3])[0].number_input("Model seeds", 1, MAX_SEEDS, key="tr_model_seeds",
                                                  help=links.SEEDS_HELP))
by_paper: dict[str, list[Preset]] = {}
for _preset in list_presets():
    by_paper.setdefault(_preset.paper, []).append(_preset)
for paper, presets in by_paper.items():
    st.subheader(f"Presets: findings of the {paper}" if "report" in paper else f"Presets: findings of {paper}")
    if any(p.protocol for p in presets):
        protocol = st.radio("Stitch", list(links.PROTOCOL_WORDS), format_func=links.PROTOCOL_WORDS.get,
                            index=list(links.PROTOCOL_WORDS).index(protocol), key="tr_protocol", horizontal=True,
                            help=links.PROTOCOL_HELP)
    scaled_group = any(len(preset_scales(p.name)) > 1 for p in presets)
    if scaled_group:
        scale = st.radio("Data", list(SCALES), format_func=SCALES.get, horizontal=True,
                         index=list(SCALES).index(scale), key="tr_data", help=links.SCALE_HELP)
        wanted = None if scale == "digits" else scale  # a shown preset's link follows the choice
        if "preset" in st.query_params and st.query_params.get("data") != wanted:
            if wanted is None:
                del st.query_params["data"]
            else:
                st.query_params["data"] = wanted
    presets = [links.shown_preset(p.name, protocol, scale)[0] for p in presets]
    for k, preset in enumerate(presets):
        if k % 4 == 0:  # rows of four cards
            cols = st.columns(4)
        with cols[k % 4]:
            st.markdown(f"**{preset.title}**")
            st.caption(preset.claim + (" (on digits only)" if scaled_group and preset.dataset != scale else ""))
            jobs = links.preset_jobs(preset, n_seeds)
            if missing := missing_weights(preset):  # its pretrained towers are not on this machine: say what to do
                st.caption(f":material/cloud_off: It {weights_words(missing)}.")
            else:
                ui.show_plan_estimate(jobs)  # the models and sweeps not in the store yet, one after the other
            times = f" from {n_seeds} seeds" if n_seeds > 1 else ""
            if st.button("Run", key=f"preset_{preset.name}", disabled=ui.viewer_mode() or bool(missing), type="primary",
                         help=f"Trains {len(preset.recipes)} models, then {len(preset.sweeps)} sweep(s){times}") and _submit(jobs):
                st.query_params.from_dict(links.preset_link(preset, n_seeds))


# ---------------------------------------------------------------------------- your own sweep


def _adapter_recipe() -> None:
    """The adapter recipe whose adapter and epochs a link's (or a run's) are, picked; else a note."""
    values = {f.key: st.session_state.get(PREFIX + f.key) for f in declared(KIND)}
    choice = links.adapter_choice(values)
    st.session_state["_tr_adapter_note"] = None if choice else (
        f"This link's adapter ({values['kind']}, {values['init']} start, {values['epochs']} epochs) is none of "
        "these: Launch uses the one picked.")  # fmt: skip
    if choice:
        st.session_state["tr_adapter"] = choice


def _spec(form: dict, adapter: str, **given: object) -> object:
    """The sweep the form makes with the ``adapter`` recipe picked and the page's own ``given`` fields."""
    spec, epochs = links.SWEEP_ADAPTERS[adapter]
    values = {**form, "train_data": form["train_data"] or None}
    return spec_form.spec_from_form(KIND, values, adapter=spec, epochs=epochs, **given)


url_fields = any(f.key in st.query_params for f in declared(KIND))
if spec_form.from_link(KIND, prefix=PREFIX, state_keys=PICKERS) is not None:
    _adapter_recipe()
elif not spec_form.linked(KIND):
    st.session_state.pop("_tr_adapter_note", None)
for _key, _value in STARTING.items():
    st.session_state.setdefault(_key, _value)  # widgets take their values from here, never twice

with st.expander("Your own sweep", expanded=url_fields or not st.query_params.to_dict()):
    spec_form.show_link_notes(PREFIX, clear=not spec_form.linked(KIND))
    form = spec_form.widgets(KIND, ("metrics", "train_data"), per_row=2, prefix=PREFIX)
    c = st.columns([2, 3])
    adapter = c[0].selectbox("Adapter", list(links.SWEEP_ADAPTERS), key="tr_adapter", persist_state="session")
    if st.session_state.get("_tr_adapter_note"):
        c[0].caption(f":material/warning: {ui.plain(st.session_state['_tr_adapter_note'])}")
    with c[1]:
        form |= spec_form.widgets(KIND, ("control", "simplicity"), per_row=2, prefix=PREFIX)
    with st.popover("More sweep settings: training, controls, measures"):  # a link's or a run's, as it gave them
        form |= spec_form.widgets(KIND, MORE, per_row=3, prefix=PREFIX)
    picked, built = st.tabs(["Trained models", "Build A and B from trait recipes"])
    with picked:
        zoo = sorted(r.summary["ref"] for r in list_zoo_models(ui.get_store()))
        left, right = st.columns(2)
        with left:
            ref_a = ui.pick_model("a", zoo, 0, prefix="tr_")
        with right:
            ref_b = ui.pick_model("b", zoo, 1, prefix="tr_")
        positions, spec, why_not = None, None, "pick models A and B"  # why_not: why Launch is disabled
        if ref_a and ref_b:
            try:
                names = [c.name for c in ui.cuts_of(ref_a)]
                if (linked := st.session_state.pop("_tr_link_positions", None)) is not None:  # a link's cuts
                    st.session_state["tr_positions"] = [n for n in linked if n in names]
                positions = st.multiselect("Positions (empty: every cut)", names, key="tr_positions",
                                           persist_state="session")
                a, b = ui.load_for_display(ref_a), ui.load_for_display(ref_b)
            except Exception as exc:  # noqa: BLE001 -- a loader failure is shown, not raised
                ui.show_error(exc, f"loading {ref_a} or {ref_b}")
                why_not = "a model could not be loaded (above)"
            else:
                dataset = ui.pick_dataset("tr_", default_dataset(a, b))
                why_not = ui.dataset_fit("tr_", dataset, {"a": a, "b": b})
                if why_not is None:
                    data = None if dataset == default_dataset(a, b) else dataset  # None: B's own (same run id)
                    try:
                        spec = _spec(form, adapter, a=ref_a, b=ref_b, positions=tuple(positions) or None, dataset=data)
                    except StitchError as exc:
                        ui.show_error(exc)
                        why_not = "the form has an error (above)"
        ui.show_estimate("sweep", spec)
        if ui.launch_button("Launch sweep", why_not, key="tr_launch") and spec is not None:
            run_id = _submit([("sweep", spec)])
            if run_id:
                st.query_params.from_dict({"run": run_id})
    with built:
        c = st.columns(6)
        arch = c[0].selectbox("Architecture", ("cnn", "mlp"), key="tr_arch", persist_state="session")
        kind_a = c[1].selectbox("A's trait", TRAITS, key="tr_trait_a", persist_state="session")
        kind_b = c[2].selectbox("B's trait", TRAITS, key="tr_trait_b", persist_state="session")
        layer = c[3].text_input("Special layer", key="tr_layer",
                                persist_state="session", help="special-*: the one layer fine-tuned")
        x = c[4].number_input("Class X", 0, 9, key="tr_x", persist_state="session")
        y = c[5].number_input("Class Y (relabel)", 0, 9, key="tr_y", persist_state="session")
        try:
            ra = trait_recipe(kind_a, arch=arch, seed=1, x=int(x), y=int(y), layer=layer)
            rb = trait_recipe(kind_b, arch=arch, seed=0, x=int(x), y=int(y), layer=layer)
            st.caption(f"A: {ui.plain(ra.label())}  \nB: {ui.plain(rb.label())}")
        except StitchError as exc:
            ui.show_error(exc)
            ra = rb = None
        if st.button("Train A and B, then sweep", key="tr_build", disabled=ra is None or ui.viewer_mode()):
            try:
                sweep = _spec(form, adapter, a=zoo_ref(ra), b=zoo_ref(rb))
            except StitchError as exc:
                ui.show_error(exc)
            else:
                run_id = _submit([("zoo", ra), ("zoo", rb), ("sweep", sweep)])
                if run_id:
                    st.query_params.from_dict({"run": run_id})


ui.rerun_when_jobs_finish()  # a model trained meanwhile shows up in the pickers

# ---------------------------------------------------------------------------- results


def _sweep_panel(run_id: str, title: str | None = None) -> None:
    """One sweep's view; a preset's sweep (or a link's run) not in the store yet is said as such, not an error."""
    if ui.get_store().lookup(run_id) is None:
        st.info(f"{title or 'This sweep'} has not been run yet (run {ui.code_span(run_id, ui.text.LINK_CHARS)}).")
    elif (rec := ui.linked_run(run_id, ("sweep",), "a sweep")) is not None:  # another kind: a link to Results
        run_views.sweep_view(rec, key="tr", title=title)


def _preset_panels(preset: Preset, seeds: int = 1) -> None:
    """A preset's figures (the penalty or a trait metric along the cut, one line per sweep, references dashed),
    redrawn while any of its sweeps runs; beside a reading across ``seeds`` model seeds, titled as the first
    seed's."""
    ids = [run_id_for("sweep", spec.to_dict()) for spec in preset.sweeps]

    @ui.live_while_running(*ids)
    def live() -> None:
        for k, panel in enumerate(preset.panels):
            lines = panel_lines(preset, panel, ui.get_store())
            title = panel.title + (": model seed 0 (bars: its 95% interval over the test images)" if seeds > 1 else "")
            label = panel.metric and parse_metric(panel.metric).label  # "3 predicted as 8"; None: the penalty
            ui.chart(st, preset_lines.preset_figure(lines, title=title, label=label),
                     key=f"tr-panel-{preset.name}-{k}", file_name=f"{preset.name}-panel-{k + 1}.csv")  # fmt: skip
            waiting = [ln["title"] for ln in lines if ln["state"] is None]
            if waiting:
                st.caption(f"Not run yet: {', '.join(waiting)}. Press Run above to train the models and run them.")
        if any(panel.metric is None for panel in preset.panels):
            st.caption(f"Stitching {PENALTY_WORDS}: B's accuracy minus the stitched model's at each cut in percentage "
                       "points (error of C minus error of B, as Bansal et al. define it).")  # fmt: skip
        st.caption("Dashed lines are references: the same stitch from another bottom (a random-init A, a plain A, "
                   "B itself). A claim holds only where its line leaves theirs.")

    live()


def _across_seeds(preset: Preset, n: int) -> None:
    """The preset read across ``n`` model seeds: its figures with each line the mean over the finished seeds and a
    t-interval, or a table per sweep (a preset without figures: simplicity); redrawn while any runs."""
    ids = [run_id_for(kind, s.to_dict()) for kind, s in links.preset_jobs(preset, n) if kind == "sweep"]

    @ui.live_while_running(*ids)
    def live() -> None:
        across = across_model_seeds(preset.name, ui.get_store(), n, preset.protocol, preset.dataset)
        done = min(len(sweep["done"]) for sweep in across)
        st.markdown(f"#### Across {n} model seeds")
        st.caption(f"Seeds {', '.join(map(str, across[0]['seeds']))}: each trains every model and adapter from its "
                   f"own seed. {done} of {n} finished for every sweep. Each value is the mean over the finished "
                   f"seeds, with a 95% t-interval across them once {MIN_SEEDS} or more have finished (the spread "
                   "training adds; each run's own interval over test images is in its sweep below).")  # fmt: skip
        for k, panel in enumerate(preset.panels):
            label = panel.metric and parse_metric(panel.metric).label
            fig = preset_lines.preset_figure(seed_lines(preset, k, across), label=label,
                                             title=f"{panel.title}: mean across seeds (bars: 95% t-interval, "
                                                   f"{MIN_SEEDS} seeds or more)")  # fmt: skip
            ui.chart(st, fig, key=f"tr-seeds-{preset.name}-{k}", file_name=f"{preset.name}-panel-seeds-{k + 1}.csv")
        if not preset.panels:
            for sweep in across:
                st.markdown(f"**{sweep['title']}** ({len(sweep['done'])} of {n} seeds)")
                rows = across_rows(sweep)
                if rows:
                    st.dataframe(rows, hide_index=True)
                else:
                    st.caption("No seed of this sweep has finished yet.")

    live()


preset_name = st.query_params.get("preset")
if preset_name:
    st.divider()
    try:
        preset, note = links.shown_preset(preset_name, protocol, scale)
    except StitchError as exc:
        ui.show_error(exc)
    else:
        if note:
            st.warning(ui.plain(note), icon=":material/warning:")
        st.markdown(f"### {preset.title}")
        if preset.protocol is not None:
            st.caption(f"Stitch: {links.PROTOCOL_WORDS[preset.protocol]}.")
        if len(preset_scales(preset.name)) > 1:
            st.caption(f"Data: {SCALES[preset.dataset]}.")
        st.markdown(f"*Claim* ({preset.paper}): {preset.claim}  \n*Look for:* {preset.look_for}")
        if preset.noise:  # the effect is near the test images' noise: said before anyone reads the curves
            st.caption(f"Near the noise: {preset.noise}")
        if n_seeds > 1:
            _across_seeds(preset, n_seeds)
        if preset.panels:
            _preset_panels(preset, n_seeds)
        for sweep_title, sweep_spec in zip(preset.sweep_titles, preset.sweeps, strict=True):
            # with figures above (they say it), each sweep's own plots on request
            with st.expander(f"Sweep: {sweep_title}") if preset.panels else st.container():
                _sweep_panel(run_id_for("sweep", sweep_spec.to_dict()), sweep_title)
elif st.query_params.get("run"):
    st.divider()
    _sweep_panel(st.query_params["run"])
