"""Models: train a zoo model from a recipe (a background job), load or upload any model and inspect its cuts.

URL: ``models?run=<id>`` shows a zoo training run, ``models?ref=<ModelRef>`` an inspected model.
"""

from pathlib import Path

import pandas as pd
import streamlit as st

import ui
from stitchcore.data.images import list_datasets, load_dataset
from stitchcore.errors import StitchError
from stitchcore.experiments import check_spec
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.experiments.zoo_recipe import starts_from_hub
from stitchcore.models.archs import arch_input_kind, arch_recipe_defaults, list_archs
from stitchcore.models.info import describe_model
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.preprocess import format_size, format_values
from stitchcore.models.refs import check_store_ref, parse_ref, upload_ref
from stitchcore.models.sources.zoo import list_zoo_models
from stitchcore.params import form_defaults
from stitchcore.plots import runs as plots
from stitchcore.stitching.evaluate import model_accuracy
from stitchcore.store.uploads import UPLOAD_EXTS, save_upload
from ui import spec_form
from views import run_views

DEFAULT = ZooRecipe()  # the form's defaults are the recipe's defaults
REF_HELP = """Any model ref, e.g.
`zoo:cnn-digits-s0` (a model trained here) ·
`timm:resnet18?pretrained=false` ·
`torchvision:resnet18?weights=none` (random init, seeded: add `&seed=N`, default 0) ·
`hf:/path/to/model_dir` ·
`file:/path/model.pt?arch=zoo:cnn`"""
ARCH_HELP = """What the checkpoint's weights fit: `zoo:cnn`, `zoo:mlp`, `zoo:resnet`, `timm:resnet18`,
`torchvision:resnet18`. Leave blank for a `.safetensors` saved by StitchLab (it records its architecture)."""
PICK_NONE = "—"


KIND, PREFIX = "zoo", "zoo_"
MAIN = ("seed", "optimizer", "epochs", "image_size", "l1", "l2")
TRAITS = ("relabel", "drop_class", "prune_every", "prune_fraction", "augment", "keep_epochs",
          "finetune_layer", "finetune_epochs", "finetune_data", "finetune_lr")  # fmt: skip
MORE = ("lr", "batch_size", "momentum", "weight_decay", "arch_kwargs")


def _arch_defaults() -> None:
    """Another architecture: the fields some architecture has its own defaults for (AdamW and 40 epochs for
    a ViT) take this one's, or the recipe's."""
    own, arch = form_defaults(KIND), st.session_state[PREFIX + "arch"]
    for key in {k for a in list_archs() for k in arch_recipe_defaults(a)}:
        st.session_state[PREFIX + key] = arch_recipe_defaults(arch).get(key, own[key])


# ------------------------------------------------------------------------------ train


def train_form() -> str | None:
    """The recipe form (a ``?run=`` of a zoo run, or a link's recipe fields, fill it); returns the id of the
    run submitted now, if one was."""
    spec_form.from_link(KIND, prefix=PREFIX)
    spec_form.show_link_notes(PREFIX, clear=not spec_form.linked(KIND))
    archs = [a for a in list_archs() if arch_input_kind(a) == "image"]
    st.session_state.setdefault(PREFIX + "arch", DEFAULT.arch)
    st.session_state.setdefault(PREFIX + "dataset", DEFAULT.dataset)
    c = st.columns([1, 1, 2])
    arch = c[0].selectbox("Architecture", archs, key=PREFIX + "arch", on_change=_arch_defaults,
                          help="picking one sets the fields it has its own defaults for (AdamW, 40 epochs for "
                               "the transformers)")  # fmt: skip
    dataset = c[1].selectbox("Dataset", list_datasets(), key=PREFIX + "dataset",
                             help="digits ships with scikit-learn; the others need their files under $STITCHLAB_DATA")
    start_ref = c[2].text_input(
        "Fine-tune from", placeholder="fresh weights", key=PREFIX + "start",
        help="start from a trained model instead of a fresh init (the report's Fig. 6: one start fine-tuned "
             "with L1 + pruning and with L2): zoo:NAME, file:PATH of the architecture above, or "
             "timm:NAME / torchvision:NAME with num_classes= the dataset's (its own architecture is used)",
    ).strip() or None  # fmt: skip
    values = spec_form.widgets(KIND, MAIN, prefix=PREFIX, per_row=6)
    with st.expander("Traits, pruning and fine-tuning"):
        values |= spec_form.widgets(KIND, TRAITS, prefix=PREFIX, per_row=5)
    with st.expander("More training settings"):
        values |= spec_form.widgets(KIND, MORE, prefix=PREFIX, per_row=5)
    recipe, why_not = None, None
    try:
        recipe = spec_form.spec_from_form(KIND, values, dataset=dataset, start=start_ref,
                                          arch=DEFAULT.arch if starts_from_hub(start_ref) else arch)  # a hub start brings its own
        if start_ref is not None:  # the start loads and fits the dataset: said now, not after Train
            check_spec(KIND, recipe, ui.get_store())
    except StitchError as exc:
        spec_form.show_refusal(KIND, exc, prefix=PREFIX)
        recipe, why_not = None, "the recipe has an error (above)"
    if recipe is not None and recipe.fine_tunes_hub:
        st.caption(f"Architecture: **{recipe.arch}**, the start's own (the picker above does not apply); inputs "
                   f"through its preprocessing" + (f" at {recipe.image_size}x{recipe.image_size}" if recipe.image_size
                                                   else " at its own size"))  # fmt: skip
    ui.show_estimate(KIND, recipe, form_keys={"epochs": PREFIX + "epochs"})
    if ui.viewer_mode():
        st.caption("Viewer mode: training is switched off; trained models can still be inspected below.")
    if not ui.launch_button("Train", why_not, key="zoo_train") or recipe is None:
        return None
    try:
        job = ui.get_runner().submit(KIND, recipe)
    except Exception as exc:  # noqa: BLE001 - show_error logs the traceback of non-StitchErrors
        ui.show_error(exc, "submitting the training run")
        return None
    st.query_params["run"] = job.id
    return job.id


def show_run(run_id: str) -> None:
    """The live view of a zoo run (``?run=``); a recipe trained before shows at once."""
    first = ui.get_runner().get(run_id)
    if first is not None and first.kind == "zoo" and first.cached and first.summary:
        st.success(f"Already trained — from the store: {ui.code_span(first.summary['ref'])}")
    snap = ui.run_view(run_id, key="zoo", cards=run_views.CARDS)
    if snap is None:
        return
    if snap.kind != "zoo":
        st.page_link(
            ui.page_file("results"),
            label="This run is not a zoo model: open it on Results",
            query_params={"run": run_id},
        )
    ref = (snap.summary or {}).get("ref") if snap.kind == "zoo" else None
    if ref and snap.state == "done" and st.button(f"Inspect {ui.plain(ref)}", key="zoo-inspect"):
        st.session_state["ref_text"] = ref
        st.query_params["ref"] = ref


# ------------------------------------------------------------------------------ inspect


def pick_zoo() -> None:
    if st.session_state.get("zoo_pick", PICK_NONE) != PICK_NONE:
        st.session_state["ref_text"] = st.session_state["zoo_pick"]


def choose_ref() -> str | None:
    """The ref to inspect: a button press (typed or uploaded) this run, else ``?ref=`` from the URL."""
    target = st.session_state.pop("pending_ref", None)  # an upload saved in the previous run
    if target:
        st.session_state["ref_text"] = target
    if "ref_text" not in st.session_state:
        st.session_state["ref_text"] = st.query_params.get("ref", "")
    trained = [rec.summary["ref"] for rec in list_zoo_models(ui.get_store()) if rec.summary.get("ref")]
    left, right = st.columns([3, 2])
    left.text_input("Model ref", key="ref_text", help=REF_HELP, placeholder="zoo:cnn-digits-s0")
    right.selectbox(
        "… or a trained zoo model",
        [PICK_NONE, *trained],
        key="zoo_pick",
        on_change=pick_zoo,
        help="models trained above (or by the CLI) in this store",
    )
    if st.button("Inspect", type="primary", key="inspect"):
        target = st.session_state["ref_text"].strip() or None
        if target is None:
            ui.show_error(
                StitchError(
                    "type a model ref first, e.g. zoo:cnn-digits-s0 or timm:resnet18?pretrained=false"
                )
            )
    with st.expander("Upload a checkpoint (.pt, .pth, .safetensors)"):
        upload_form()
    return target or st.query_params.get("ref") or None


# ------------------------------------------------------------------------------ upload

NO_DATASET = ""  # the dataset picker's "unknown" entry


def upload_inputs(path: Path, arch: str, options: str, base: str, loaded: LoadedModel) -> str | None:
    """Dataset, mean, std and size of an upload, pre-filled from its arch's defaults and editable.

    Returns the resulting ``file:`` ref (shown under the fields), or None while a field is malformed.
    The fields refill when the file, arch or options change (``base``), and mean/std/size when
    another dataset is picked (a zoo arch normalises with its dataset's mean/std).
    """
    state = st.session_state
    if state.get("upload_base") != base or "upload_dataset" not in state:  # another file or arch
        state["upload_base"] = base
        state["upload_dataset"] = loaded.dataset or NO_DATASET
        state.pop("upload_filled_for", None)
    datasets = [NO_DATASET, *list_datasets()]
    if state["upload_dataset"] not in datasets:
        datasets.insert(1, state["upload_dataset"])  # a recorded one such as digits|relabel3to8
    c = st.columns([2, 2, 2, 1])
    dataset = c[0].selectbox(
        "Trained on (dataset)",
        datasets,
        key="upload_dataset",
        format_func=lambda d: d or "unknown",
        help="Experiments with this model default to it; the accuracy below is on its test split",
    )
    if state.get("upload_filled_for") != (base, dataset) or "upload_mean" not in state:
        state["upload_filled_for"], state["upload_warning"] = (base, dataset), ""
        defaults = loaded
        if dataset != (loaded.dataset or NO_DATASET):
            try:  # a zoo arch's mean/std are its dataset's: ask the loader with only the dataset given
                defaults = ui.load_for_display(upload_ref(path, arch, options, dataset=dataset or None))
            except StitchError as exc:  # e.g. the dataset's files are not here: the user types them in
                state["upload_warning"] = f"{exc}. Type its mean and std in."
                defaults = None
        if defaults is not None or "upload_mean" not in state:
            defaults = defaults or loaded
            state["upload_mean"] = format_values(defaults.preprocess.mean)
            state["upload_std"] = format_values(defaults.preprocess.std)
            state["upload_size"] = format_size(defaults.input_shape[1:])
            state["upload_note"] = defaults.meta.get("defaults") or ""
    if state.get("upload_warning"):
        st.warning(ui.plain(state["upload_warning"]))
    mean = c[1].text_input("Mean", key="upload_mean", help="per channel (0.485,0.456,0.406) or one for all")
    std = c[2].text_input("Std", key="upload_std", help="per channel or one for all; positive")
    size = c[3].text_input("Size", key="upload_size", help="the input side (or H,W) images are resized to")
    if state.get("upload_note"):
        arch_name = arch or loaded.meta.get("arch")
        st.caption(f"Pre-filled with the defaults of {ui.code_span(arch_name)}: {ui.plain(state['upload_note'])}.")
    try:
        ref = upload_ref(path, arch, options, dataset=dataset or None, mean=mean, std=std, size=size)
    except Exception as exc:  # noqa: BLE001 - show_error logs the traceback of non-StitchErrors
        ui.show_error(exc, "building the upload's ref")
        return None
    st.markdown("Resulting ref")
    st.code(ref, language=None, wrap_lines=True)
    return ref


def upload_form() -> None:
    """Upload a checkpoint, name its architecture, check its inputs; Load upload inspects the ref."""
    viewer = ui.viewer_mode()
    up = st.file_uploader(
        "Checkpoint",
        type=[e.lstrip(".") for e in UPLOAD_EXTS],
        key="upload",
        disabled=viewer,
        help="read with torch.load(weights_only=True) or safetensors: no pickled code runs",
    )
    c = st.columns(2)
    arch = c[0].text_input(
        "Checkpoint architecture",
        key="upload_arch",
        placeholder="zoo:cnn",
        help=ARCH_HELP,
        disabled=viewer,
    ).strip()
    options = c[1].text_input(
        "Architecture options (JSON)",
        key="upload_opts",
        disabled=viewer,
        placeholder='{"num_classes": 10}',
        help='e.g. {"channels": [16, 32]} for zoo:cnn, {"in_chans": 1} for timm; '
        "the number of classes is read off the checkpoint",
    )
    if viewer:
        st.caption("Viewer mode: uploads are switched off.")
    ref = None
    if up is not None:
        try:
            path = save_upload(ui.get_store(), up.name, up.getvalue())
            if arch or path.suffix == ".safetensors":
                base = upload_ref(path, arch, options)
                with st.spinner("Reading the checkpoint …"):
                    loaded = ui.load_for_display(base)
            else:
                st.info("Fill in the checkpoint's architecture (e.g. `zoo:cnn`) to see its inputs.")
                loaded = None
        except Exception as exc:  # noqa: BLE001 - show_error logs the traceback of non-StitchErrors
            ui.show_error(exc, "reading the upload")
            loaded = None
        if loaded is not None:
            ref = upload_inputs(path, arch, options, base, loaded) if loaded.input_kind == "image" else base
    if st.button("Load upload", key="upload_go", disabled=viewer or up is None) and ref:
        st.session_state["pending_ref"] = ref
        st.rerun()  # the text box shows the upload's file: ref, then it is inspected


SCORE_PARAMS = 5_000_000  # models up to this size are scored as they are inspected; larger ones on request


@st.cache_data(show_spinner="Scoring on the test split …", max_entries=64)
def test_accuracy(ref: str, dataset: str) -> float:
    """Accuracy of ``ref`` on ``dataset``'s test split, through the model's own preprocessing."""
    return model_accuracy(ui.load_for_display(ref), load_dataset(dataset))


def base_accuracy(ref: str, loaded: LoadedModel, info: dict) -> tuple[str, str]:
    """The Base accuracy metric and its help: stored (zoo runs), else scored on the model's dataset."""
    if info["accuracy"] is not None:
        return f"{info['accuracy']:.1%}", "stored test accuracy of the zoo run"
    dataset = loaded.dataset
    if dataset is None or loaded.input_kind != "image":
        return "unknown", "no training dataset known: give one (dataset= in a file: ref) to score the model"
    try:
        ds = load_dataset(dataset)
    except StitchError as exc:
        return "unknown", f"cannot score on {dataset}: {exc}"
    if loaded.num_classes != ds.num_classes:
        return "—", f"the model has {loaded.num_classes} outputs but {dataset} has {ds.num_classes} classes"
    scored = st.session_state.setdefault("scored_refs", set())
    if info["params"] > SCORE_PARAMS and ref not in scored:
        if not st.button(f"Score on {ui.plain(dataset)}", key="score", help="a large model: scoring takes a while"):
            return "not scored", f"{len(ds.labels('test')):,} test images of {dataset}"
        scored.add(ref)
    acc = test_accuracy(ref, dataset)
    return f"{acc:.1%}", f"{dataset} test split ({len(ds.labels('test')):,} images), preprocessing as shown"


def inspect(text: str) -> None:
    """Load ``text`` (cached per canonical ref), then show its summary, cut table and cut diagram.

    In viewer mode only models in the store open (zoo: models, uploads under the store)."""
    try:
        ref = str(parse_ref(text))
        if ui.viewer_mode():  # a viewer opens what the store holds, never a server path or a hub model
            check_store_ref(ref, ui.get_store().root)
        with st.spinner(f"Loading {ui.plain(ref)} …"):
            loaded = ui.load_for_display(ref)
            cuts = ui.cuts_of(ref)
    except Exception as exc:  # noqa: BLE001 - show_error logs the traceback of non-StitchErrors
        ui.show_error(exc, f"loading {text}")
        return
    st.query_params["ref"] = ref  # the link reproduces this view
    info = describe_model(loaded)
    st.markdown(f"#### {ui.code_span(ref)}")
    c = st.columns(4)
    c[0].metric("Parameters", f"{info['params']:,}")
    c[1].metric("Input shape", " × ".join(str(d) for d in info["input_shape"]))
    c[2].metric("Classes", info["num_classes"] if info["num_classes"] is not None else "—")
    with c[3]:
        value, why = base_accuracy(ref, loaded, info)
        st.metric("Base accuracy", value, help=ui.plain(why))
    names = info["class_names"]
    shown = ", ".join(names[:12]) + (f", … ({len(names)} in all)" if len(names) > 12 else "")
    weights = f"{info['init']} · " if info["init"] else ""
    st.markdown(  # a file's or a hub config's names (class names, its dataset) are text
        f"**Architecture** {ui.code_span(info['arch'])} · **Input** {ui.plain(info['input_kind'])} · "
        f"**Dataset** {ui.plain(info['dataset'] or 'unknown')} · **Cut points** {len(cuts)}  \n"
        f"**Preprocessing** {ui.plain(info['preprocessing'])}  \n"
        f"**Weights** {ui.plain(weights)}fingerprint {ui.code_span(ui.fingerprint_of(ref))}"
        + (f"  \n**Class names** {ui.plain(shown)}" if shown else "")
    )
    st.caption("The fingerprint hashes every weight (sha256 of the parameters and buffers): the same"
               " fingerprint means the same weights, on any machine. Random weights are drawn from the ref's"
               " seed= (default 0).")
    if info["defaults"]:
        st.caption(f"Defaults this ref took: {ui.plain(info['defaults'])}.")
    rows = [
        {
            "name": c.name,
            "shape": " × ".join(map(str, c.shape)),
            "layout": c.layout,
            "depth": round(c.depth, 3),
        }
        for c in cuts
    ]
    left, right = st.columns([2, 3])
    left.dataframe(pd.DataFrame(rows), hide_index=True, key="cut-table")
    diagram = [{"name": c.name, "shape": list(c.shape), "layout": c.layout, "depth": c.depth} for c in cuts]
    ui.chart(right, plots.cut_diagram(diagram, title="Cut points"), key="cut-diagram")


# ------------------------------------------------------------------------------ page

st.title("Models")
st.caption(
    "Train small built-in models in the background, or load any checkpoint and see where it can be cut."
)
st.subheader("Train a zoo model")
submitted = train_form()
run_id = submitted or st.query_params.get("run")
if run_id:
    show_run(run_id)
ui.rerun_when_jobs_finish()  # a model trained meanwhile shows up in the pickers below

st.divider()
st.subheader("Load / inspect a model")
target = choose_ref()
if target:
    inspect(target)
