"""Traits: sweep the cut along depth and see where a trait lives (Oxford stitching report).

``?run=<sweep run id>`` shows one sweep (filling in while it runs); ``?preset=<name>`` shows a
preset's sweeps.  Presets and the forms submit background jobs: zoo recipes first, then the sweep.
"""

from __future__ import annotations

import streamlit as st

import ui
from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.dataset_check import default_dataset
from stitchcore.experiments.preset_seeds import (
    MAX_SEEDS,
    SEED_STEP,
    across_model_seeds,
    across_rows,
    seed_lines,
    seeded_preset,
)
from stitchcore.experiments.sweep import SweepSpec
from stitchcore.experiments.trait_presets import (
    SCALES,
    TASK_EPOCHS,
    TRAITS,
    Preset,
    get_preset,
    list_presets,
    panel_lines,
    preset_scales,
    trait_recipe,
    zoo_ref,
)
from stitchcore.measures.intervals import MIN_SEEDS
from stitchcore.measures.meaning import meaning
from stitchcore.measures.traits import METRIC_HELP, parse_metric
from stitchcore.models.sources.zoo import list_zoo_models
from stitchcore.plots import preset_lines
from stitchcore.report.figures import PENALTY_WORDS
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.store.results import run_id_for
from views import run_views

ui.page_setup("Traits")
st.title("Traits along depth")
st.caption(
    "C = B after the cut ∘ adapter ∘ A up to the cut, at every depth. Where a trait of A or B shows up in C "
    "locates it; the random-init control (two untrained twins stitched the same way) shows what the adapter "
    "alone can do."
)
ADAPTERS = {  # label -> (adapter spec, epochs)
    f"task-trained, least-squares start, {TASK_EPOCHS} epochs (the report's)": (AdapterSpec(init="lstsq"), TASK_EPOCHS),
    "least-squares match, fitted only (label-free)": (AdapterSpec(init="lstsq"), 0),
    "task-trained (random init, 10 epochs)": (AdapterSpec(), 10),
    "none: weight substitution (identity)": (AdapterSpec(kind="identity", norm="none", init="identity"), 0),
}
# What each metric family's number means (measures/meaning.py), for the metrics field's help: one line.
METRIC_WORDS = "Each 0 .. 1, chance ≈ 1 / classes; " + "; ".join(
    f"{family}: {meaning(family).direction}" for family in ("accuracy", "class_acc", "confusion", "blackout", "decor"))


def _submit(jobs: list[tuple[str, object]]) -> str | None:
    """Queue (kind, spec) jobs in order (one CPU worker runs them in order); returns the last id."""
    last = None
    try:
        for kind, spec in jobs:
            last = ui.get_runner().submit(kind, spec).id
    except StitchError as exc:
        ui.show_error(exc)
        return None
    return last


# ---------------------------------------------------------------------------- presets

PROTOCOL_LABELS = {"task": "task-trained stitch (the report's protocol)",
                   "match": "least-squares match, no task training (label-free)"}  # fmt: skip
_query_protocol = st.query_params.get("protocol")
protocol = _query_protocol if _query_protocol in PROTOCOL_LABELS else "task"
_query_data = st.query_params.get("data")
scale = _query_data if _query_data in SCALES else "digits"  # the Bansal presets' data (trait_presets.SCALES)
if _query_data is not None and _query_data not in SCALES:
    st.warning(f"This link asked for data={ui.quote(_query_data)}: presets run on {', '.join(SCALES)}; showing "
               "digits.", icon=":material/warning:")  # fmt: skip


def _at_scale(preset: Preset, data: str) -> Preset:
    """``preset`` on ``data`` where it runs there (a Bansal preset), else as it is (digits)."""
    return get_preset(preset.name, protocol=preset.protocol, dataset=data) if data in preset_scales(preset.name) else preset


def _link(preset: Preset, seeds: int) -> dict[str, str]:
    """The ``?preset=`` link of a preset as shown (its protocol, its data, its model seeds)."""
    return {"preset": preset.name, **({"protocol": "match"} if preset.protocol == "match" else {}),
            **({"data": preset.dataset} if preset.dataset != "digits" else {}),
            **({"seeds": str(seeds)} if seeds > 1 else {})}  # fmt: skip
_query_seeds = st.query_params.get("seeds", "1")
_seeds_ok = (_query_seeds.isascii() and _query_seeds.isdigit() and len(_query_seeds) <= 3  # not "²", not 5,000 digits
             and 1 <= int(_query_seeds) <= MAX_SEEDS)
if "tr_model_seeds" not in st.session_state:  # a link's seeds, once; then the widget's own
    st.session_state["tr_model_seeds"] = int(_query_seeds) if _seeds_ok else 1
if not _seeds_ok:
    st.warning(f"This link asked for seeds={ui.quote(_query_seeds)}: model seeds are 1 to {MAX_SEEDS}; showing "
               f"{st.session_state['tr_model_seeds']}.", icon=":material/warning:")  # fmt: skip
n_seeds = int(st.columns([1, 3])[0].number_input(
    "Model seeds", 1, MAX_SEEDS, key="tr_model_seeds",
    help=f"Run each preset from this many seeds: seed k trains every model from seed {SEED_STEP}·k on and the "
         "adapters from seed k (seed 0 is the preset as it always runs, so its stored runs are reused). The "
         "results then show each cut's mean across the seeds with a 95% t-interval: whether the finding is the "
         "recipe's or one training run's."))  # fmt: skip
_by_paper: dict[str, list] = {}
for _preset in list_presets():
    _by_paper.setdefault(_preset.paper, []).append(_preset)
for paper, presets in _by_paper.items():
    st.subheader(f"Presets: findings of the {paper}" if "report" in paper else f"Presets: findings of {paper}")
    if any(p.protocol for p in presets):
        protocol = st.radio("Stitch", list(PROTOCOL_LABELS), format_func=PROTOCOL_LABELS.get, horizontal=True,
                            index=list(PROTOCOL_LABELS).index(protocol), key="tr_protocol",
                            help="The report trains the stitch on the task (digits without 3s, A and B frozen); "
                                 "matching fits it to B's activations by least squares, with no labels")  # fmt: skip
        presets = [get_preset(p.name, protocol=protocol) if p.protocol else p for p in presets]
    scaled_group = any(len(preset_scales(p.name)) > 1 for p in presets)
    if scaled_group:
        scale = st.radio("Data", list(SCALES), format_func=SCALES.get, horizontal=True,
                         index=list(SCALES).index(scale), key="tr_data",
                         help="The bundled 8x8 digits (seconds per model), or 5,000 real 28x28 MNIST digits with a "
                              "three-block CNN (about half a minute per model), where a random-init bottom no longer "
                              "stitches as well as a trained one at the conv cuts. Label noise runs on digits "
                              "only.")  # fmt: skip
        presets = [_at_scale(p, scale) for p in presets]
        wanted = None if scale == "digits" else scale  # a shown preset's link follows the choice
        if "preset" in st.query_params and st.query_params.get("data") != wanted:
            if wanted is None:
                del st.query_params["data"]
            else:
                st.query_params["data"] = wanted
    for k, preset in enumerate(presets):
        if k % 4 == 0:  # rows of four cards
            cols = st.columns(4)
        with cols[k % 4]:
            st.markdown(f"**{preset.title}**")
            st.caption(preset.claim + (" (on digits only)" if scaled_group and preset.dataset != scale else ""))
            seeded = [seeded_preset(preset.name, k, preset.protocol, preset.dataset) for k in range(n_seeds)]
            jobs = [("zoo", r) for p in seeded for r in p.recipes] + [("sweep", s) for p in seeded for s in p.sweeps]
            ui.show_plan_estimate(jobs)  # the models and sweeps not in the store yet, one after the other
            times = f" from {n_seeds} seeds" if n_seeds > 1 else ""
            if st.button("Run", key=f"preset_{preset.name}", disabled=ui.viewer_mode(), type="primary",
                         help=f"Trains {len(preset.recipes)} models, then {len(preset.sweeps)} sweep(s){times}") and _submit(jobs):
                st.query_params.from_dict(_link(preset, n_seeds))


# ---------------------------------------------------------------------------- your own sweep


def _prefill(run_id: str) -> None:
    """A permalink fills the form with its sweep spec, once per run id."""
    if st.session_state.get("_traits_prefilled") == run_id:
        return
    st.session_state["_traits_prefilled"] = run_id
    rec = ui.get_store().lookup(run_id)
    if rec is None or rec.kind != "sweep":
        return
    try:
        spec = spec_from_record(rec)
    except StitchError:  # a record this version cannot read: the run's view below says why
        return
    st.session_state.update(tr_pick_a=spec.a, tr_ref_a=spec.a, tr_pick_b=spec.b, tr_ref_b=spec.b, tr_dataset=spec.dataset,
                            tr_metrics=", ".join(spec.metrics), tr_train_data=spec.train_data or "",
                            tr_control=spec.control, tr_simplicity=spec.simplicity)  # fmt: skip


def _options() -> dict:
    """Metrics and adapter options shared by both forms -> SweepSpec keyword arguments."""
    c = st.columns([3, 2, 2])
    metrics = c[0].text_input("Trait metrics (comma-separated)", key="tr_metrics",
                              persist_state="session", help=f"{METRIC_HELP}.  \n{METRIC_WORDS}")
    train_data = c[1].text_input("Adapter data (empty: the evaluation data)", key="tr_train_data",
                                 persist_state="session",
                                 help="e.g. digits|drop3: the adapter never sees a 3")  # fmt: skip
    adapter = c[2].selectbox("Adapter", list(ADAPTERS), key="tr_adapter", persist_state="session")
    c = st.columns(2)
    control = c[0].checkbox("Random-init control", key="tr_control", persist_state="session")
    simplicity = c[1].checkbox("Simplicity measures", key="tr_simplicity", persist_state="session")
    spec, epochs = ADAPTERS[adapter]
    return {"metrics": tuple(m.strip() for m in metrics.split(",") if m.strip()), "train_data": train_data or None,
            "adapter": spec, "epochs": epochs, "control": control, "simplicity": simplicity}  # fmt: skip


if st.query_params.get("run"):
    _prefill(st.query_params["run"])
_DEFAULTS = {"tr_metrics": "accuracy, class_acc:3, confusion:3->8", "tr_train_data": "digits|drop3",
             "tr_control": True, "tr_simplicity": True, "tr_arch": "cnn", "tr_trait_a": "relabel",
             "tr_trait_b": "plain", "tr_layer": "fc1", "tr_x": 3, "tr_y": 8}  # fmt: skip
for _key, _value in _DEFAULTS.items():
    st.session_state.setdefault(_key, _value)

with st.expander("Your own sweep", expanded=not st.query_params.to_dict()):
    opts = _options()
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
                        spec = SweepSpec(a=ref_a, b=ref_b, positions=tuple(positions) or None, dataset=data, **opts)
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
                sweep = SweepSpec(a=zoo_ref(ra), b=zoo_ref(rb), **opts)
            except StitchError as exc:
                ui.show_error(exc)
            else:
                run_id = _submit([("zoo", ra), ("zoo", rb), ("sweep", sweep)])
                if run_id:
                    st.query_params.from_dict({"run": run_id})


ui.rerun_when_jobs_finish()  # a model trained meanwhile shows up in the pickers

# ---------------------------------------------------------------------------- results


def _sweep_panel(run_id: str, title: str | None = None) -> None:
    rec = ui.get_store().lookup(run_id)
    if rec is None:
        st.info(f"{title or 'This sweep'} has not been run yet (run {ui.code_span(run_id, ui.text.LINK_CHARS)}).")
    elif rec.kind != "sweep":
        st.info(f"Run {ui.code_span(run_id)} is a {ui.plain(rec.kind)} run, not a sweep.")
        st.page_link(ui.page_file("results"), label="Open it on Results", query_params={"run": run_id})
    else:
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
            ui.chart(st, preset_lines.preset_figure(lines, title=title, label=_metric_words(panel.metric)),
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


def _metric_words(metric: str | None) -> str | None:
    """A trait metric's name in words ("3 predicted as 8"); None for a penalty panel."""
    return None if metric is None else parse_metric(metric).label


def _across_seeds(preset: Preset, n: int) -> None:
    """The preset read across ``n`` model seeds: its figures with each line the mean over the finished seeds and a
    t-interval, or a table per sweep (a preset without figures: simplicity); redrawn while any runs."""
    ids = [run_id_for("sweep", s.to_dict())
           for k in range(n) for s in seeded_preset(preset.name, k, preset.protocol, preset.dataset).sweeps]

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
            fig = preset_lines.preset_figure(seed_lines(preset, k, across), label=_metric_words(panel.metric),
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
        preset = get_preset(preset_name)
        if preset.protocol is not None:
            preset = get_preset(preset_name, protocol=protocol)
        if scale != "digits" and scale not in preset_scales(preset_name):
            st.warning(f"{preset.title} runs on digits only: showing it on digits.", icon=":material/warning:")
        preset = _at_scale(preset, scale)
    except StitchError as exc:
        ui.show_error(exc)
    else:
        st.markdown(f"### {preset.title}")
        if preset.protocol is not None:
            st.caption(f"Stitch: {PROTOCOL_LABELS[preset.protocol]}.")
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
            if preset.panels:  # the figures above say it; each sweep's own plots on request
                with st.expander(f"Sweep: {sweep_title}"):
                    _sweep_panel(run_id_for("sweep", sweep_spec.to_dict()), sweep_title)
            else:
                _sweep_panel(run_id_for("sweep", sweep_spec.to_dict()), sweep_title)
elif st.query_params.get("run"):
    st.divider()
    _sweep_panel(st.query_params["run"])
