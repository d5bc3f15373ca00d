"""Form parts the launching pages share: the model and dataset pickers, the check that a dataset fits the
models' heads, and the Launch button that says why it is disabled."""

from __future__ import annotations

import streamlit as st

from stitchcore.cuts import coarse_cuts
from stitchcore.data import list_datasets
from stitchcore.errors import StitchError
from stitchcore.experiments import streamed_folder
from stitchcore.experiments.dataset_check import head_fix, head_mismatch
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.refs import parse_ref
from ui import roles
from ui.errors import show_error
from ui.resources import cuts_of, dataset_for_display, viewer_mode
from ui.text import plain

__all__ = ["CUSTOM_REF", "IMAGEFOLDER", "dataset_fit", "launch_button", "pick_dataset", "pick_model"]

CUSTOM_REF = "other (type a model ref)…"


def pick_model(role: str, zoo_refs: list[str], default_index: int, prefix: str = "") -> str | None:
    """A selectbox of trained zoo models plus a free ModelRef field; returns the canonical ref.

    Widget keys are ``{prefix}pick_{role}`` and ``{prefix}ref_{role}`` (URL prefill writes them).
    """
    pick_key, ref_key, auto_key = f"{prefix}pick_{role}", f"{prefix}ref_{role}", f"{prefix}pick_{role}_auto"
    options = zoo_refs + [CUSTOM_REF]
    picked = st.session_state.get(pick_key)
    if picked is not None and picked not in options:
        st.session_state[pick_key] = CUSTOM_REF
    if (picked == CUSTOM_REF and st.session_state.get(auto_key) and len(zoo_refs) > default_index
            and not st.session_state.get(ref_key)):
        del st.session_state[pick_key]  # "other" only because too few were trained then: follow the new models
    if pick_key not in st.session_state:
        st.session_state[pick_key] = options[min(default_index, len(options) - 1)]
        # "other" for want of models (B while only one exists), not by choice: the next model trained is taken
        st.session_state[auto_key] = st.session_state[pick_key] == CUSTOM_REF
    choice = st.selectbox(f"Model {role.upper()}", options, key=pick_key, persist_state="session")
    text = choice
    if choice == CUSTOM_REF:
        text = st.text_input(f"Model {role.upper()} ref", key=ref_key, persist_state="session",
                             placeholder="timm:resnet18?pretrained=false, file:/path/model.pt?arch=zoo:cnn …")
    if not text:
        return None
    try:
        return str(parse_ref(text))
    except StitchError as exc:
        show_error(exc)
        return None


IMAGEFOLDER = "a folder of images (ImageFolder)…"


def pick_dataset(prefix: str, default: str | None) -> str | None:
    """The dataset picker: every registered dataset, or an ImageFolder path; returns its name or None.

    Follows ``default`` (B's training set, else A's) until the user picks another; a value the URL put
    under ``{prefix}dataset`` (``digits|drop3``, ``imagefolder:/x``) is selected as given.
    """
    key, auto_key, path_key = f"{prefix}dataset", f"{prefix}dataset_auto", f"{prefix}dataset_path"
    options = list_datasets() + [IMAGEFOLDER]
    value = st.session_state.get(key)
    if value is None or value == st.session_state.get(auto_key):  # untouched: follow the models' default
        st.session_state[key] = value = default
    st.session_state[auto_key] = default
    if isinstance(value, str) and value.startswith("imagefolder:"):
        st.session_state[path_key] = value.removeprefix("imagefolder:")
        st.session_state[key] = value = IMAGEFOLDER
    if value is not None and value not in options:
        options.insert(0, value)  # a transformed dataset (digits|drop3) stays choosable

    def label(name: str) -> str:
        return f"{name}  (the models' training set)" if name == default else name

    choice = st.selectbox("Dataset", options, key=key, index=None,
                          persist_state="session", placeholder="choose a dataset", format_func=label,
                          help="The data the adapter trains and is evaluated on; default: B's training set")
    if choice != IMAGEFOLDER:
        return choice
    path = st.text_input("Image folder", key=path_key,
                         persist_state="session", placeholder="/data/pets (or /data/pets?size=32 to squash)",
                         help="train/<class>/* and test/<class>/* (or val/). Read per batch at full resolution, "
                              "each model's own preprocessing (a hub model's resize and centre crop), so memory "
                              "does not grow with the folder; ?size=N squashes every image to NxN and holds "
                              "them in memory (what runs before issue 42 did with a plain folder)")  # fmt: skip
    if not path.strip():
        return None
    dataset = streamed_folder(f"imagefolder:{path.strip()}")  # what the run will read (a new spec's reading)
    squashed = "?" in dataset and "full" not in dataset.partition("?")[2].partition("|")[0].split("&")
    st.caption("Squashed to the given size and held in memory." if squashed else
               "Read per batch at each model's own transform: never squashed, memory flat in the folder's size.")
    return dataset




def _use_ref(prefix: str, role: str, ref: str) -> None:
    st.session_state[f"{prefix}pick_{role}"] = CUSTOM_REF
    st.session_state[f"{prefix}ref_{role}"] = ref


def dataset_fit(prefix: str, dataset: str | None, models: dict[str, LoadedModel]) -> str | None:
    """Check the chosen dataset against the models' heads (``models``: role -> model); None when it fits.

    Shows the dataset in one line, or what is wrong and what to do: for a random-init hub model a button
    that switches to its ref with the matching ``num_classes``.  Returns the reason Launch is disabled.
    """
    if dataset is None:
        return "choose a dataset: neither model says which data it was trained on"
    try:
        with st.spinner(f"Loading {plain(dataset, 200)} …"):
            ds = dataset_for_display(dataset)
    except Exception as exc:  # noqa: BLE001 - a StitchError is said; anything else (a MemoryError for an image
        show_error(exc, f"loading {dataset}")  # folder's ?size=1000000000) too, its traceback in the server log
        return f"dataset {dataset} cannot be loaded"
    reason = None
    for role, model in models.items():
        why = head_mismatch(model, ds, role.upper())
        if why is None:
            continue
        reason = reason or why
        fix = head_fix(model, ds.num_classes)
        if fix:
            st.warning(f"{plain(why)}. Its head is random anyway: give it {ds.num_classes} outputs.",
                       icon=":material/warning:")
            st.button(f"Use {plain(fix)}", key=f"{prefix}fix_{role}", on_click=_use_ref, args=(prefix, role, fix))
        else:
            st.warning(f"{plain(why)}. Choose the dataset it was trained on, or a model trained on "
                       f"{plain(ds.name)}.", icon=":material/warning:")
    c, h, w = ds.image_shape
    size = (f"files read per batch at full resolution (each model's own transform; {h}x{w} for a model without one)"
            if ds.streamed else f"images of {c}x{h}x{w}")  # fmt: skip
    st.caption(f"Data: {plain(ds.name)} · {ds.num_classes} classes · {len(ds.y_train):,} train / "
               f"{len(ds.y_test):,} test {size}")
    return reason


def launch_button(label: str, reason: str | None, *, key: str) -> bool:
    """The primary button that submits a job; disabled with ``reason`` shown while the form is incomplete
    (and in viewer mode)."""
    if viewer_mode():
        reason = "this server is in viewer mode (STITCHLAB_VIEWER=1): results only"
    elif not roles.allowed("launch"):
        reason = "this server runs a class, and starting runs here is for the teacher"
    said = plain(reason, 300) if reason else None  # a reason may name a link's dataset or a bundle's model
    clicked = st.button(label, type="primary", key=key, disabled=reason is not None,
                        help=f"Disabled: {said}" if said else None)
    if said:
        st.caption(f":material/block: {label} is disabled: {said}.")
    return clicked and not roles.refuse("launch")


CUT_SETS = ("all", "coarse", "choose")  # every block-level cut | a few spread over depth | picked by hand
COARSE_CUTS = 6  # cuts per model in the coarse set


def hold_cut_set(prefix: str, applied: dict[str, str], *, from_run: bool) -> None:
    """A link's or a run's cuts (``applied``: the parameters :func:`ui.spec_form.prefill` applied, its cut
    lists already in ``{prefix}cuts_a`` / ``{prefix}cuts_b``) into the cut set: "choose" those it names (a side
    it leaves out: every cut of that model), else every cut when a run (``from_run``) names none."""
    chosen = [role for role, field in (("a", "senders"), ("b", "receivers")) if field in applied]
    if not chosen and not from_run:
        return
    st.session_state[f"{prefix}cutset"] = "choose" if chosen else "all"
    for role in ("a", "b"):
        st.session_state.pop(f"_{prefix}every_{role}", None)
        if chosen and role in chosen:
            st.session_state[f"{prefix}cuts_{role}"] = list(st.session_state[f"{prefix}cuts_{role}"])
        elif chosen:  # every cut of whichever model the picker holds: the multiselect fills them in
            st.session_state[f"_{prefix}every_{role}"] = True


def pick_cut_set(prefix: str, refs: dict[str, str | None]) -> tuple[tuple[str, ...] | None, ...] | None:
    """The "Cuts" radio (every cut, a coarse set, or chosen by hand in a multiselect per model) -> the cut
    names of A and of B (None = every cut, also when "choose" picks them all, so the run is "all"'s), or
    None when "choose" leaves a side empty.  State: ``{prefix}cutset``, ``{prefix}cuts_a`` / ``_b``."""
    how = st.radio("Cuts", CUT_SETS, horizontal=True, key=f"{prefix}cutset", persist_state="session",
                   format_func={"all": "all (fine)", "coarse": f"coarse (≤{COARSE_CUTS} each)", "choose": "choose…"}.get,
                   help="all: every block-level cut; coarse: a few spread over depth; choose: pick them")  # fmt: skip
    picked = tuple(_cut_set(prefix, ref, role, how) if ref else None for role, ref in refs.items())
    return None if how == "choose" and () in picked else picked


def _cut_set(prefix: str, ref: str, role: str, how: str) -> tuple[str, ...] | None:
    if how == "all":
        return None
    try:
        cuts = cuts_of(ref)
    except StitchError as exc:
        show_error(exc)
        return None
    if how == "coarse":
        return tuple(c.name for c in coarse_cuts(cuts, COARSE_CUTS))
    names, key = [c.name for c in cuts], f"{prefix}cuts_{role}"
    if st.session_state.pop(f"_{prefix}every_{role}", False):  # a link or a run that chose the other side's cuts
        st.session_state[key] = names
    elif key in st.session_state:
        st.session_state[key] = [n for n in st.session_state[key] if n in names]
    else:
        st.session_state[key] = [c.name for c in coarse_cuts(cuts, COARSE_CUTS)]
    label = "Sender cuts of A (rows)" if role == "a" else "Receiver cuts of B (columns)"
    picked = set(st.multiselect(label, names, key=key, persist_state="session"))
    return None if picked == set(names) else tuple(n for n in names if n in picked)  # execution order
