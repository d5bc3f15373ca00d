"""Stitch: pick A, B, cuts, adapter and training; launch a background job; watch it live.

``?run=<id>`` shows that run and fills the form with its spec, so a copied link
reproduces both the result and the form.  A cut in the URL may be an alias (``cut_a=layer2``
on a ResNet): the picker selects the canonical cut (``layer2.1``) and says "layer2 = layer2.1".
"""

from __future__ import annotations

import math
import re
from difflib import get_close_matches

import streamlit as st

import ui
from stitchcore.cuts import Cut, alias_note
from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.dataset_check import default_dataset
from stitchcore.experiments.stitch import KEEPS, StitchSpec
from stitchcore.models.sources.zoo import list_zoo_models
from stitchcore.stitching.adapters import INITS, NORMS, RESAMPLES, AdapterSpec, compatibility, list_adapters
from stitchcore.stitching.precision import PRECISIONS
from stitchcore.stitching.train import OPTIMIZERS, parse_objective
from ui.text import LINK_CHARS, one_line, quoted
from views import run_views

OBJECTIVES = ("task", "match", "kd", "task+0.5*kd")
DEFAULTS = StitchSpec(a="", b="", cut_a="", cut_b="")  # the library's defaults, shared with the CLI


FORM_PARAMS = {  # URL query key -> (session key, type): a copied link reproduces the form
    "a": ("ref_a", str), "b": ("ref_b", str), "cut_a": ("cut_a", str), "cut_b": ("cut_b", str),
    "kind": ("kind", str), "norm": ("norm", str), "resample": ("resample", str), "init": ("init", str),
    "objective": ("objective", str), "optimizer": ("optimizer", str), "lr": ("lr", float),
    "epochs": ("epochs", int), "batch_size": ("batch_size", int), "seed": ("seed", int),
    "max_train": ("max_train", int), "max_test": ("max_test", int), "head": ("head", str),
    "head_cut": ("head_cut", str), "dataset": ("dataset", str), "precision": ("precision", str),
    "val_fraction": ("val_fraction", float), "split_seed": ("split_seed", int), "keep": ("keep", str),
    "seeds": ("seeds", int), "noise_control": ("noise_control", bool),
}


# What a link's number may look like before int() / float() reads it (ASCII digits, not "²"; not 5,000 digits)
_NUMBER = re.compile(r"[-+]?(\d{1,12}(\.\d{0,12})?|\.\d{1,12})(e[-+]?\d{1,3})?|[-+]?(inf|nan)",
                     re.IGNORECASE | re.ASCII)
NUMBER_RANGES = {  # form key -> (least, most) the widget takes; a URL value outside is clamped, with a warning
    "lr": (1e-5, 1.0), "epochs": (0, 500), "batch_size": (4, 4096), "seed": (0, 10**6),
    "max_train": (0, 10**7), "max_test": (0, 10**7), "val_fraction": (0.0, 0.45), "split_seed": (0, 10**6),
    "seeds": (1, 20),
}
CHOICES = {  # form key -> the values its selectbox offers (objective: any formula parse_objective takes)
    "kind": tuple(list_adapters()), "norm": NORMS, "resample": RESAMPLES, "init": INITS,
    "optimizer": tuple(OPTIMIZERS), "head": ("b", "a"), "precision": PRECISIONS, "keep": KEEPS,
}
FORM_DEFAULTS = dict(  # the library's defaults, shared with the CLI; widgets take their values from here
    kind=DEFAULTS.adapter.kind, norm=DEFAULTS.adapter.norm, resample=DEFAULTS.adapter.resample,
    init=DEFAULTS.adapter.init, objective="task", optimizer=DEFAULTS.optimizer, lr=DEFAULTS.lr,
    epochs=DEFAULTS.epochs, batch_size=DEFAULTS.batch_size, seed=DEFAULTS.seed, max_train=0, max_test=0, head="b",
    precision=DEFAULTS.precision, val_fraction=DEFAULTS.val_fraction, split_seed=DEFAULTS.split_seed,
    keep=DEFAULTS.keep, seeds=DEFAULTS.seeds, noise_control=DEFAULTS.noise_control,
)
FLAGS = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}


def _url_value(key: str, raw: str) -> tuple[object | None, str | None]:
    """A URL parameter as the form can hold it, and a warning when that is not what the URL said.

    Out-of-range numbers are clamped, unknown choices fall back to the default; None: leave the field.
    """
    state_key, cast = FORM_PARAMS[key]
    shown, bare = quoted(raw), one_line(raw, LINK_CHARS)  # a 10 KB value is said by its start and length
    if cast is bool:  # bool("false") is True: a link's flag is read by its words
        flag = FLAGS.get(raw.strip().lower())
        if flag is None:
            default = FORM_DEFAULTS[state_key]
            return default, f"{key}={shown} is not true or false; the form uses {str(default).lower()}"
        return flag, None
    if cast is not str and not _NUMBER.fullmatch(raw):  # int("²") and int() of 5,000 digits raise, "1_0" is 10
        return None, f"{key}={shown} is not a number; the form keeps its own"
    try:
        value = cast(raw)
    except ValueError:
        return None, f"{key}={shown} is not a {'number' if cast is not str else 'value'}; the form keeps its own"
    if key in NUMBER_RANGES:
        lo, hi = NUMBER_RANGES[key]
        if not math.isfinite(value):
            return FORM_DEFAULTS[key], f"{key}={bare} is not a finite number; the form uses {FORM_DEFAULTS[key]}"
        if not lo <= value <= hi:
            used = min(max(value, lo), hi)
            return used, f"{key}={bare} is outside {lo:g}..{hi:g}; the form uses {used:g}"
    if key in CHOICES and value not in CHOICES[key]:
        default = FORM_DEFAULTS[state_key]
        return default, f"{key}={shown} is not one of {', '.join(CHOICES[key])}; the form uses {default}"
    if key == "objective":
        try:
            parse_objective(value)
        except StitchError as exc:
            return FORM_DEFAULTS["objective"], f"objective={shown}: {one_line(exc, 200)}; the form uses task"
    return value, None


def _spec_params(spec: StitchSpec) -> dict[str, str]:
    """The form as URL parameters (only what differs from the defaults, plus models and cuts)."""
    values = {
        "a": spec.a, "b": spec.b, "cut_a": spec.cut_a, "cut_b": spec.cut_b, "kind": spec.adapter.kind,
        "norm": spec.adapter.norm, "resample": spec.adapter.resample, "init": spec.adapter.init,
        "objective": spec.objective, "optimizer": spec.optimizer, "lr": spec.lr, "epochs": spec.epochs,
        "batch_size": spec.batch_size, "seed": spec.seed, "max_train": spec.max_train or 0,
        "max_test": spec.max_test or 0, "head": spec.head, "head_cut": spec.head_cut, "dataset": spec.dataset,
        "precision": None if spec.precision == DEFAULTS.precision else spec.precision,
        **{k: getattr(spec, k) for k in ("val_fraction", "split_seed", "keep", "seeds", "noise_control")
           if getattr(spec, k) != getattr(DEFAULTS, k)},  # a run stored before the split: val_fraction=0.0
    }
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in values.items() if v is not None}


def _prefill(params: dict[str, str]) -> None:
    """Copy URL parameters (or a stored run's spec, for ?run=ID) into the widgets, once per URL."""
    stamp = repr(sorted(params.items()))
    if st.session_state.get("_prefilled") == stamp:
        return
    st.session_state["_prefilled"] = stamp
    for key in ("cut_a", "cut_b", "head_cut"):
        st.session_state.pop(f"_alias_{key}", None)  # a new URL: the notes of the last one are gone
        st.session_state.pop(f"_unknown_{key}", None)
    if "run" in params:
        rec = ui.get_store().lookup(params["run"])
        if rec is None or rec.kind != "stitch":
            return
        try:
            params = _spec_params(spec_from_record(rec))
        except StitchError:  # a record this version cannot read: the run's view below says why
            return
    if "dataset" not in params:
        st.session_state.pop("dataset", None)  # the run's own default: B's training set
    notes = []
    for key, (state_key, _) in FORM_PARAMS.items():
        if key in params:
            value, note = _url_value(key, params[key])
            if value is not None:
                st.session_state[state_key] = value
            if note:
                notes.append(note)
    st.session_state["_url_notes"] = notes  # shown above the form and beside Launch while this URL stands
    for role in ("a", "b"):
        if role in params:
            st.session_state[f"pick_{role}"] = params[role]


def _cut_choice(label: str, names: list[str], key: str, default: str | None, cuts: list[Cut]) -> str:
    """A cut picker over ``names``; a value that is an alias of one (from the URL) selects its canonical
    cut, and "alias = canonical" is shown below while that cut stays selected."""
    by_name = {c.name: c for c in cuts}
    value = st.session_state.get(key)
    if value not in names:
        canonical = next((c.name for c in cuts if value in c.aliases), None)
        if canonical in names:
            st.session_state[f"_alias_{key}"] = (value, canonical)
            st.session_state[key] = canonical
        else:
            replacement = default if default in names else names[len(names) // 2]
            if value and value == st.query_params.get(key):  # the link names a cut this model does not have
                st.session_state[f"_unknown_{key}"] = (value, replacement, get_close_matches(value, names, n=3))
            st.session_state[key] = replacement

    def label_of(name: str) -> str:
        outer = list(by_name[name].outer_aliases) if name in by_name else []
        return f"{name}  (= {', '.join(outer)})" if outer else name

    picked = st.selectbox(label, names, key=key, format_func=label_of, persist_state="session")
    alias, canonical = st.session_state.get(f"_alias_{key}", (None, None))
    if alias and picked == canonical:
        st.caption(f"Cut {ui.plain(alias_note(alias, canonical))}: the same tensor, stored under its canonical name.")
    unknown, shown, close = st.session_state.get(f"_unknown_{key}", (None, None, []))
    if unknown and picked == shown:
        near = f" (close: {', '.join(close)})" if close else ""
        st.warning(ui.plain(f"The link asked for cut {quoted(unknown)}, which this model does not have{near}; "
                            f"showing {shown}."), icon=":material/warning:")
    return picked


def _no_receiver_advice(sender: Cut, cuts_a: list[Cut], cuts_b: list[Cut], adapter: AdapterSpec) -> str:
    """What to do when no receiver fits ``sender``: the sender cuts that have one, else another adapter kind."""
    text = f"No cut of B can receive A[{sender.name}] with a {adapter.kind} adapter; "
    fitting = [s.name for s in cuts_a if any(compatibility(s, r, adapter) is None for r in cuts_b)]
    if fitting:
        more = f" (and {len(fitting) - 6} more)" if len(fitting) > 6 else ""
        return text + f"pick a sender cut that has one: {', '.join(fitting[:6])}{more}."

    def fits_with(kind: str) -> bool:
        try:
            other = AdapterSpec(kind=kind)
        except StitchError:
            return False
        return any(compatibility(sender, r, other) is None for r in cuts_b)

    kinds = [k for k in list_adapters() if k != adapter.kind and fits_with(k)]
    if kinds:
        return text + f"try the {' or '.join(kinds)} adapter."
    return text + "no cut of A fits any cut of B with it: the two models' layers do not meet."


ui.page_setup("Stitch")
st.title("Stitch two models")
url_run = st.query_params.get("run")
if url_run or any(k in st.query_params for k in FORM_PARAMS):
    _prefill(st.query_params.to_dict())
else:
    st.session_state.pop("_url_notes", None)
for _key, _value in FORM_DEFAULTS.items():
    st.session_state.setdefault(_key, _value)  # widgets below take their values from here, never twice
url_notes = st.session_state.get("_url_notes") or []
if url_notes:
    st.warning("This link asked for values the form cannot use as given:\n\n"
               + "\n".join(f"- {ui.plain(n)}" for n in url_notes), icon=":material/warning:")

zoo = sorted(r.summary["ref"] for r in list_zoo_models(ui.get_store()))
if not zoo:
    st.info("No trained models yet: run the classroom demo on Home, train one on the Models page, "
            "or type any model ref below (timm, torchvision, hf, file).")

models, cuts = st.columns(2)
with models:
    ref_a = ui.pick_model("a", zoo, 0)
    ref_b = ui.pick_model("b", zoo, 1)

loaded, still_training = {}, False
for role, ref in (("a", ref_a), ("b", ref_b)):
    if ref is None:
        continue
    try:
        with st.spinner(f"Loading {ui.plain(ref)} …"):
            loaded[role] = (ui.load_for_display(ref), ui.cuts_of(ref))
    except Exception as exc:  # an unexpected loader failure must not kill the page
        training = [j for j in ui.get_runner().list(active_only=True) if j.kind == "zoo"]
        if isinstance(exc, StitchError) and ref.startswith("zoo:") and training:
            st.info(f"Model {role.upper()} ({ui.plain(ref)}) is not trained yet; {len(training)} zoo job(s) are "
                    "running. The form fills in when they finish.")
            still_training = True
        else:
            ui.show_error(exc, f"loading {ref}")

spec: StitchSpec | None = None
why_not: str | None = None  # why Launch is disabled
if len(loaded) == 2:
    (model_a, cuts_a), (model_b, cuts_b) = loaded["a"], loaded["b"]
    with st.expander("Adapter and training", expanded=False):
        c = st.columns(4)
        kind = c[0].selectbox("Adapter", list_adapters(), key="kind", persist_state="session")
        norm = c[1].selectbox("BatchNorm", NORMS, key="norm", persist_state="session")
        resample = c[2].selectbox("Resample", RESAMPLES, key="resample", persist_state="session")
        init = c[3].selectbox("Init", INITS, key="init",
                              persist_state="session", help="lstsq: closed-form fit on cached activations")
        c = st.columns(4)
        objectives = OBJECTIVES + (() if st.session_state["objective"] in OBJECTIVES else (st.session_state["objective"],))
        objective = c[0].selectbox("Objective", objectives, key="objective", persist_state="session")
        optimizer = c[1].selectbox("Optimizer", OPTIMIZERS, key="optimizer", persist_state="session")
        lr = c[2].number_input("Learning rate", *NUMBER_RANGES["lr"], format="%.4f", key="lr",
                               persist_state="session")
        epochs = c[3].number_input("Epochs", *NUMBER_RANGES["epochs"], key="epochs", persist_state="session")
        c = st.columns(6)
        batch_size = c[0].number_input("Batch size", *NUMBER_RANGES["batch_size"], key="batch_size",
                                       persist_state="session")
        seed = c[1].number_input("Seed", *NUMBER_RANGES["seed"], key="seed", persist_state="session")
        max_train = c[2].number_input("Max training images (0 = all)", *NUMBER_RANGES["max_train"], key="max_train",
                                      persist_state="session")
        max_test = c[3].number_input("Max test images (0 = all)", *NUMBER_RANGES["max_test"], key="max_test",
                                     persist_state="session")
        head = c[4].selectbox("Head", ("b", "a"), key="head", persist_state="session",
                              help="a: keep A's head after B's middle (same-family models)")
        precision = c[5].selectbox("Precision", PRECISIONS, key="precision", persist_state="session",
                                   help="bf16: autocast over the frozen models and the adapter, float32 weights;"
                                        " fast on GPUs and AMX CPUs, slow on other CPUs")
        c = st.columns(4)
        val_fraction = c[0].number_input(
            "Validation fraction", *NUMBER_RANGES["val_fraction"], step=0.05, format="%.2f", key="val_fraction",
            persist_state="session", help="of the training images, held out: the per-epoch curve and Keep best read "
                                          "it; the reported numbers are on the test images (0: no validation)")
        split_seed = c[1].number_input("Split seed", *NUMBER_RANGES["split_seed"], key="split_seed",
                                       persist_state="session", help="which training images are held out (even "
                                                                     "over classes); stays fixed while Seed varies")
        keep = c[2].selectbox("Keep", KEEPS, key="keep", persist_state="session",
                              help="last: the adapter after the last epoch · best: after the epoch with the best "
                                   "validation accuracy (early stopping; needs a validation fraction)")
        seeds = c[3].number_input("Seeds", *NUMBER_RANGES["seeds"], key="seeds", persist_state="session",
                                  help="adapters trained with Seed, Seed+1, …: the first is the run's; the result "
                                       "shows the mean and 95% interval across them beside the test-image interval")
        noise_control = st.checkbox(
            "Noise-sender control", key="noise_control", persist_state="session",
            help="also train the same adapter (seed, init, epochs) from a sender of class-clustered noise with A's "
                 "activation shape and scale: it knows each image's label and nothing else, so a stitch that does "
                 "no better is not evidence about A's layers (Functional Alignment Can Mislead, ICML 2025). One "
                 "more adapter training; the result shows its accuracy beside the stitched one")  # fmt: skip
    with cuts:
        cut_a = _cut_choice("Sender cut (A)", [c.name for c in cuts_a], "cut_a", None, cuts_a)
        sender = next(c for c in cuts_a if c.name == cut_a)
        try:
            adapter = AdapterSpec(kind=kind, norm=norm, resample=resample, init=init)
        except StitchError as exc:
            ui.show_error(exc)
            adapter = None
        reasons = {c.name: compatibility(sender, c, adapter) for c in cuts_b} if adapter else {}
        ok = [name for name, why in reasons.items() if why is None]
        if ok:
            cut_b = _cut_choice("Receiver cut (B)", ok, "cut_b", cut_a, cuts_b)
            receiver = next(c for c in cuts_b if c.name == cut_b)
            st.caption(ui.plain(f"A[{sender.name}] {sender.layout} {tuple(sender.shape)} → "
                                f"B[{receiver.name}] {receiver.layout} {tuple(receiver.shape)}"))
        elif adapter:
            st.warning(ui.plain(_no_receiver_advice(sender, cuts_a, cuts_b, adapter)))
        if len(ok) < len(reasons):
            with st.expander(f"{len(reasons) - len(ok)} receiver cut(s) not offered"):
                for name, why in reasons.items():
                    if why is not None:
                        st.markdown(f"- {ui.code_span(name)}: {ui.plain(why)}")
        head_cut = None
        if head == "a" and ok:
            later = [c.name for c in cuts_b if c.depth > receiver.depth and c.name in {x.name for x in cuts_a}]
            head_cut = _cut_choice("Head cut (A's head from here)", later, "head_cut", later[0] if later else None,
                                   cuts_b) if later else None
            if not later:
                st.warning("No cut after the receiver is shared by A and B: head preservation needs same-family models.")
    with models:
        default_data = default_dataset(model_a, model_b)
        dataset = ui.pick_dataset("", default_data)
        why_not = ui.dataset_fit("", dataset, {"a": model_a, "b": model_b})

    def _pre(m) -> str:
        return m.preprocess.describe() if m.preprocess else "none"

    st.caption(ui.plain(f"A's input transform: {_pre(model_a)} · B's: {_pre(model_b)}"))
    if not (adapter and ok):
        why_not = why_not or f"no cut of B can receive A[{cut_a}]"
    elif head == "a" and not head_cut:
        why_not = why_not or "head a needs a cut after the receiver that A and B share"
    if why_not is None:
        try:
            spec = StitchSpec(
                a=ref_a, b=ref_b, cut_a=cut_a, cut_b=cut_b, adapter=adapter, objective=objective,
                optimizer=optimizer, lr=float(lr), epochs=int(epochs), batch_size=int(batch_size), seed=int(seed),
                max_train=int(max_train) or None, max_test=int(max_test) or None, head=head, head_cut=head_cut,
                precision=precision, val_fraction=round(float(val_fraction), 4), split_seed=int(split_seed),
                keep=keep, seeds=int(seeds), noise_control=bool(noise_control),
                dataset=None if dataset == default_data else dataset,  # None: B's own set (the run id as before)
            )
        except StitchError as exc:
            ui.show_error(exc)
            why_not = "the form has an error (above)"
elif ref_a is None or ref_b is None:
    why_not = "pick models A and B"
else:
    why_not = "the models are still training" if still_training else "a model could not be loaded (above)"

launch, rerun = st.columns([1, 1])
with launch:
    if url_notes and spec is not None:
        st.caption(f":material/warning: Launch runs the form as shown: {len(url_notes)} value(s) of the link were "
                   "changed (see the warning above).")
    if spec is not None:  # what Launch runs, read back from the spec (not from the widgets)
        st.caption(ui.plain(f"Launch runs A[{spec.cut_a}] → B[{spec.cut_b}] with a {spec.settings()}."))
    ui.show_estimate("stitch", spec, form_keys={"epochs": "epochs", "max_train": "max_train", "max_test": "max_test"})
    clicked = ui.launch_button("Launch", why_not, key="launch")
if clicked and spec is not None:
    try:
        job = ui.get_runner().submit("stitch", spec)
    except StitchError as exc:
        ui.show_error(exc)
    else:
        st.query_params.from_dict({"run": job.id, **_spec_params(spec)})
        st.session_state["_prefilled"] = repr(sorted(st.query_params.to_dict().items()))
        url_run = job.id
ui.rerun_when_jobs_finish()  # a model trained meanwhile shows up in the pickers
if url_run:
    current = ui.get_runner().get(url_run)
    if current is not None and current.is_final and current.kind == "stitch":
        if rerun.button("Re-run", help="train again although the store has this result", disabled=ui.viewer_mode()):
            spec_again = spec_from_record(ui.get_store().lookup(url_run))
            ui.get_runner().submit("stitch", spec_again, rerun=True)
            st.rerun()
    st.divider()
    if current is not None and current.kind not in run_views.CARDS:  # e.g. stitch?run=<a matrix's id>
        page = ui.PAGE_FOR_KIND.get(current.kind, "results")
        st.info(f"Run {ui.code_span(url_run)} is a {ui.plain(current.kind)} run, not a stitch: it opens on its own "
                "page.")
        st.page_link(ui.page_file(page), label=f"Open it on the {ui.PAGE_TITLES[page]} page",
                     query_params={"run": url_run}, icon=":material/open_in_new:")
    else:
        ui.run_view(url_run, key="stitch", cards=run_views.CARDS)  # a stitch (or zoo) run: its result card
