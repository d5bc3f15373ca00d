"""The one module that imports both Streamlit and stitchcore.

Holds the process-wide store and job runner (``st.cache_resource``), the
sidebar job monitor, error display, and the live run view every page shares.
Pages turn widgets into specs and call these helpers; they never train.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
import torch

from stitchcore.cuts import Cut, list_cuts
from stitchcore.data import ImageDataset, list_datasets, load_dataset
from stitchcore.device import describe_device, pick_device
from stitchcore.errors import StitchError
from stitchcore.experiments.dataset_check import head_fix, head_mismatch
from stitchcore.experiments.zoo_recipe import ZooRecipe
from stitchcore.backends import ran_where
from stitchcore.experiments.estimate import Estimate, calibrating, estimate_plan, estimate_seconds, format_duration
from stitchcore.jobs import JobRunner, JobSnapshot
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.refs import parse_ref
from stitchcore.models.sources import load_model
from stitchcore.plots import penalty_words
from stitchcore.plots import runs as plots
from stitchcore.report.figures import CURVE_POINTS, figure_csv  # a finished run's curve: as in its report
from stitchcore.report.html import report_html
from stitchcore.store.bundle import export_bundle
from stitchcore.store.results import Store, resolve_store_dir

__all__ = [
    "get_store",
    "get_runner",
    "page_setup",
    "load_for_display",
    "cuts_of",
    "pick_model",
    "pick_dataset",
    "dataset_fit",
    "launch_button",
    "show_estimate",
    "show_plan_estimate",
    "rerun_when_jobs_finish",
    "progress_with_stop",
    "progress_text",
    "viewer_mode",
    "device_label",
    "job_monitor",
    "live_while_running",
    "run_link",
    "follow_deep_link",
    "run_view",
    "run_header",
    "downloads",
    "PAGE_FOR_KIND",
    "PAGE_TITLES",
    "show_error",
    "md_text",
    "POLL_SECONDS",
]

log = logging.getLogger(__name__)

POLL_SECONDS = 2.0  # live views redraw this often while a job runs (each redraw costs every watching browser)
LIVE_CURVE_POINTS = 400  # a live curve, redrawn each poll in every watching browser, draws at most this many points
# Every chart's toolbar: the camera saves a PNG at 3x the drawn size (print-ready); no plotly logo or cloud upload.
CHART_CONFIG = {"displaylogo": False, "showSendToCloud": False, "toImageButtonOptions": {"format": "png", "scale": 3}}
# url_path of the page that shows a run kind (permalinks, the job monitor, deep links)
PAGE_FOR_KIND = {"stitch": "stitch", "zoo": "models", "matrix": "similarity", "similarity": "similarity",
                 "merge": "language", "lmstitch": "language", "lmdepth": "language", "sweep": "traits",
                 "assemble": "assemble"}
PAGE_TITLES = {"stitch": "Stitch", "models": "Models", "similarity": "Similarity", "traits": "Traits",
               "language": "Language models", "assemble": "Assemble", "settings": "Settings"}  # url_path -> the page's title (as in app.py)


@st.cache_resource(show_spinner=False)
def get_store() -> Store:
    """The results store: $STITCHLAB_STORE, else cache/ (as the CLI)."""
    return Store(resolve_store_dir())


@st.cache_resource(show_spinner=False)
def get_runner() -> JobRunner:
    """One runner per server process; every browser session sees the same jobs.  Jobs run in a worker
    process with one core left for the server ($STITCHLAB_JOB_THREADS sets their torch threads)."""
    return JobRunner(get_store(), isolation="process")


@st.cache_resource(show_spinner=False, max_entries=16)
def load_for_display(ref: str) -> LoadedModel:
    """A model loaded for display (cut lists, shapes); shared read-only, never trained."""
    return load_model(ref, store=get_store())


@st.cache_resource(show_spinner=False, max_entries=16)
def cuts_of(ref: str) -> list[Cut]:
    """The cut points of ``ref`` (see stitchcore.cuts.list_cuts)."""
    m = load_for_display(ref)
    return list_cuts(m)


def page_setup(title: str) -> None:
    """Every page calls this first: wide layout (set per page: Streamlit 1.67 resets the
    entrypoint's layout when a page runs) and the browser-tab title."""
    st.set_page_config(page_title=f"{title} · StitchLab", page_icon="🧵", layout="wide")


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
    if picked == CUSTOM_REF and st.session_state.get(auto_key) and zoo_refs and not st.session_state.get(ref_key):
        del st.session_state[pick_key]  # "other" only because nothing was trained then: follow the new models
    if pick_key not in st.session_state:
        st.session_state[pick_key] = options[min(default_index, len(options) - 1)]
        st.session_state[auto_key] = not zoo_refs
    choice = st.selectbox(f"Model {role.upper()}", options, key=pick_key)
    text = choice
    if choice == CUSTOM_REF:
        text = st.text_input(f"Model {role.upper()} ref", key=ref_key,
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

    choice = st.selectbox("Dataset", options, key=key, index=None, placeholder="choose a dataset", format_func=label,
                          help="The data the adapter trains and is evaluated on; default: B's training set")
    if choice != IMAGEFOLDER:
        return choice
    path = st.text_input("Image folder", key=path_key, placeholder="/data/pets or /data/pets?size=64",
                         help="train/<class>/* and test/<class>/* (or val/); images resized to 32x32 unless ?size=N")
    return f"imagefolder:{path.strip()}" if path.strip() else None


@st.cache_resource(show_spinner=False, max_entries=8)
def _dataset(name: str) -> ImageDataset:
    return load_dataset(name)


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
        with st.spinner(f"Loading {dataset} …"):
            ds = _dataset(dataset)
    except StitchError as exc:
        show_error(exc)
        return f"dataset {dataset} cannot be loaded"
    reason = None
    for role, model in models.items():
        why = head_mismatch(model, ds, role.upper())
        if why is None:
            continue
        reason = reason or why
        fix = head_fix(model, ds.num_classes)
        if fix:
            st.warning(f"{why}. Its head is random anyway: give it {ds.num_classes} outputs.",
                       icon=":material/warning:")
            st.button(f"Use {fix}", key=f"{prefix}fix_{role}", on_click=_use_ref, args=(prefix, role, fix))
        else:
            st.warning(f"{why}. Choose the dataset it was trained on, or a model trained on {ds.name}.",
                       icon=":material/warning:")
    c, h, w = ds.image_shape
    st.caption(f"Data: {ds.name} · {ds.num_classes} classes · {len(ds.y_train):,} train / {len(ds.y_test):,} test "
               f"images of {c}x{h}x{w}")
    return reason


def launch_button(label: str, reason: str | None, *, key: str) -> bool:
    """The primary button that submits a job; disabled with ``reason`` shown while the form is incomplete
    (and in viewer mode)."""
    if viewer_mode():
        reason = "this server is in viewer mode (STITCHLAB_VIEWER=1): results only"
    clicked = st.button(label, type="primary", key=key, disabled=reason is not None,
                        help=f"Disabled: {reason}" if reason else None)
    if reason:
        st.caption(f":material/block: {label} is disabled: {reason}.")
    return clicked


LONG_RUN_SECONDS = 60.0  # estimates above this are drawn in the warning colour


def show_estimate(kind: str, spec: Any) -> Estimate | None:
    """A caption for right above a Launch button: how long ``kind`` on ``spec`` takes on this machine.

    ":material/timer: About 6 min on this machine", in the warning colour above ~1 min; the basis of the
    estimate is in the caption's tooltip.  Shows nothing when it cannot be estimated (no spec yet, a model
    that does not load ...); never raises: an estimator failure is logged and the page goes on.

    The page never waits for a calibration (the first estimate of a model times a few of its steps): that
    runs in the background meanwhile, "Estimating ..." polls for it, and the app reruns once when it is
    done (widget values and session state stay).
    """
    if spec is None:
        return None
    return _show_estimate(lambda: estimate_seconds(kind, spec, get_store(), wait=False,
                                                   threads=get_runner().cpu_threads), kind,
                          on_cluster=_runs_on_cluster(kind))  # fmt: skip


def _runs_on_cluster(kind: str) -> bool:
    """Whether a job of ``kind`` goes to Ray under the server's Settings (a char-GPT's training is a zoo job,
    and zoo jobs run here)."""
    try:
        options = get_runner().options_for(kind)
    except StitchError:
        return False
    return options is not None and options.backend != "local"


def show_plan_estimate(items: list[tuple[str, Any]]) -> Estimate | None:
    """As :func:`show_estimate` for runs queued one after the other (``[(kind, spec), ...]``, e.g. the
    classroom demo's two models and their stitch): the time of those not in the store yet."""
    return _show_estimate(lambda: estimate_plan(items, get_store(), wait=False, threads=get_runner().cpu_threads),
                          "+".join(k for k, _ in items))


def _show_estimate(
    compute: Callable[[], Estimate | None], what: str, *, on_cluster: bool = False
) -> Estimate | None:
    try:
        est = compute()
        if est is not None:
            _draw_estimate(est, on_cluster=on_cluster)
            return est
        if not calibrating():
            return None  # nothing to say: it cannot be estimated
    except Exception:  # an estimate is a courtesy: it must never take a page down
        log.exception("estimating %s failed", what)
        return None

    @st.fragment(run_every=1.0)
    def waiting() -> None:
        try:
            done = compute() is not None or not calibrating()
        except Exception:
            log.exception("estimating %s failed", what)
            return
        if done:
            st.rerun(scope="app")  # the page draws the estimate (or nothing) where it belongs; polling stops
        st.caption(":material/timer: Estimating how long this takes on this machine …")

    waiting()
    return None


def _draw_estimate(est: Estimate, *, on_cluster: bool = False) -> None:
    """The estimate's caption; ``on_cluster``: the run goes to Ray (Settings), whose tasks run side by side,
    so the time is what this machine alone would take, said as such."""
    if est.stored:
        st.caption(":material/bolt: In the store already: opens at once.")
        return
    text = f":material/timer: About {format_duration(est.seconds)} on this machine"
    if on_cluster:
        text += "; the Ray cluster runs its parts side by side"
    if est.seconds > LONG_RUN_SECONDS:
        text = f":orange[{text} · it runs in the background]"
    cluster = (" It runs on the Ray cluster (Settings): shorter by up to the cluster's number of task slots,"
               " plus its workers' start-up (seconds)." if on_cluster else "")
    st.caption(text, help=f"Estimate ({format_duration(est.low)} to {format_duration(est.high)}), {est.basis}."
                          f"{cluster} Jobs run in the background: you can leave the page.")


def watch_kind(snap: JobSnapshot) -> str:
    """``lm_zoo`` for a zoo job that trains a language model, else the job's kind (pages group jobs by it)."""
    spec = getattr(snap, "spec", None)
    if snap.kind == "zoo" and isinstance(spec, ZooRecipe) and spec.trains_language_model():
        return "lm_zoo"
    return snap.kind


def rerun_when_jobs_finish(kinds: tuple[str, ...] = ("zoo", "lm_zoo")) -> None:
    """Rerun the whole app once when a queued or running job of ``kinds`` finishes, so lists of models
    (pickers, "No char-GPTs trained yet") show what it made without a reload.

    ``zoo`` is an image model's training, ``lm_zoo`` a char-GPT's.  A fragment that polls every 2 s only
    while such a job is queued or running; none, no polling.  Call it after the page's Launch buttons
    (a job submitted later in the same script run is watched from the next run on).  Session state and
    widget values survive the rerun, and nothing is submitted again (buttons read False on a rerun).
    """
    try:
        runner = get_runner()
        watched = tuple(s.id for s in runner.list(active_only=True) if watch_kind(s) in kinds)
    except Exception as exc:  # a broken runner must not take the page down
        show_error(exc, "watching jobs")
        return

    @st.fragment(run_every=2.0 if watched else None)
    def _watch() -> None:
        if watched and any((s := runner.get(i)) is None or s.is_final for i in watched):
            st.rerun(scope="app")

    _watch()


def viewer_mode() -> bool:
    """Viewer mode (``STITCHLAB_VIEWER=1``): results are shown, no jobs can be launched."""
    return os.environ.get("STITCHLAB_VIEWER", "").lower() in ("1", "true", "yes")


def device_label() -> str:
    try:
        return describe_device(pick_device(), threads=get_runner().cpu_threads)
    except StitchError as exc:  # a bad STITCHLAB_DEVICE must not take the app down
        return f"device error: {exc}"


def md_text(text: str) -> str:
    """Escape Markdown so labels like ``zoo:a[block1]`` show their brackets."""
    return "".join("\\" + ch if ch in "\\`*_{}[]<>()#+-!|~$" else ch for ch in text)


def show_error(exc: BaseException, what: str | None = None) -> None:
    """One red line for the user; every page shows its errors through here.

    A :class:`StitchError` is the user's to fix (a bad ref, an unknown cut): its own message,
    nothing logged.  Anything else is a bug: the traceback goes to the server log and the line
    reads ``unexpected error: Type: message (details in the server log)``, after ``what`` failed
    when given ("loading zoo:x failed: unexpected error: ...").
    """
    if isinstance(exc, StitchError):
        st.error(str(exc) or type(exc).__name__, icon=":material/error:")
        return
    log.error("unexpected error%s", f" while {what}" if what else "", exc_info=exc)
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    detail = type(exc).__name__ + (f": {first[:160]}" if first else "")
    where = f"{what} failed: " if what else ""
    st.error(f"{where}unexpected error: {detail} (details in the server log)", icon=":material/error:")


def follow_deep_link(current_url_path: str) -> None:
    """Send a permalink that landed on Home to the page it names.

    On a freshly started server Streamlit does not know the pages yet when the
    first browser asks for /stitch?run=ID, so it runs the default page (Home)
    with the query string intact; this finishes the trip.
    """
    params = st.query_params.to_dict()
    if current_url_path != "home" or not params:
        return
    target = None
    if "run" in params:
        rec = get_store().lookup(params["run"])
        target = PAGE_FOR_KIND.get(rec.kind, "results") if rec is not None else "results"
    elif "ref" in params:
        target = "models"
    elif "preset" in params:
        target = "traits"
    elif "a" in params or "b" in params:
        target = "stitch"
    if target is not None:
        st.switch_page(f"views/{target}.py", query_params=params)


def run_link(snap: JobSnapshot) -> str:
    """Relative URL of the page that shows this run (a permalink)."""
    return f"{PAGE_FOR_KIND.get(snap.kind, 'results')}?run={snap.id}"


@st.fragment(run_every=2.0)
def job_monitor() -> None:
    """Sidebar: running and queued jobs with progress, each a link to its run."""
    runner = get_runner()
    active = runner.list(active_only=True)
    try:
        device = device_label()
    except Exception as exc:  # a bug finding the device must not take the sidebar down
        show_error(exc, "finding the device")
        device = "unknown"
    st.caption(f"Device: {device} · torch {torch.__version__.split('+')[0]}")
    if not active:
        st.caption("No jobs running.")
        return
    st.markdown(f"**Jobs ({len(active)})**")
    for snap in active[:8]:
        label = snap.label if len(snap.label) <= 72 else snap.label[:71] + "…"
        st.markdown(f"[{md_text(label)}]({run_link(snap)})")
        st.progress(snap.progress, text=progress_text(snap, snap.state))


# ---------------------------------------------------------------------------- run view


def live_while_running(*run_ids: str | None) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Decorator for a page's live panel: a fragment that redraws every ``POLL_SECONDS`` while any
    of ``run_ids`` (None entries ignored) is queued or running, then reruns the page once, so the
    finished panel is drawn as a static page and polling stops."""
    runner = get_runner()
    ids = [r for r in run_ids if r]

    def running() -> bool:
        return any(s is not None and not s.is_final for s in map(runner.get, ids))

    active = running()

    def deco(draw: Callable[[], None]) -> Callable[[], None]:
        @st.fragment(run_every=POLL_SECONDS if active else None)
        def live() -> None:
            if active and not running():
                st.rerun()  # redraw once as a static page: polling stops
            draw()

        return live

    return deco


def run_view(run_id: str, *, key: str = "run") -> JobSnapshot | None:
    """The live view of one run: progress, Stop, curves; the result card once done.

    Polls with a fragment while the job is active and stops polling once it ends.
    """
    runner = get_runner()
    snap = runner.get(run_id)
    if snap is None:
        st.error(f"No run {run_id!r} in the store at {get_store().root}. It may have been deleted.")
        return None

    @live_while_running(run_id)
    def live() -> None:
        _draw_run(runner.get(run_id) or snap, key)

    live()
    return snap


def progress_text(snap: JobSnapshot, what: str | None = None) -> str:
    """A progress bar's text: ``what`` (default: the job's message) · 42% · about 1 min 10 s left; the time
    left only once the job's progress rate means something (see JobSnapshot.eta_seconds)."""
    parts = [what or snap.message or snap.state, f"{snap.progress:.0%}"]
    eta = snap.eta_seconds()
    if eta is not None:
        parts.append(f"about {format_duration(eta)} left")
    return " · ".join(md_text(p) for p in parts)


def progress_with_stop(snap: JobSnapshot, key: str, also_cancel: tuple[str | None, ...] = ()) -> None:
    """A running job's progress bar (with the time left) and its Stop button (which also cancels the
    ``also_cancel`` runs)."""
    cols = st.columns([5, 1])
    cols[0].progress(snap.progress, text=progress_text(snap))
    if cols[1].button("Stop", key=key, type="secondary", disabled=viewer_mode()):
        for run_id in (snap.id, *also_cancel):
            if run_id:
                get_runner().cancel(run_id)  # False for a run that has already ended


BADGES = {"done": ":material/check_circle:", "running": ":material/hourglass_top:", "queued": ":material/schedule:",
          "failed": ":material/error:", "cancelled": ":material/stop_circle:", "interrupted": ":material/warning:"}


def run_header(snap: JobSnapshot, key: str, *, title: str | None = None, kept: str = "",
               also_cancel: tuple[str | None, ...] = (), caption_extra: str = "") -> None:
    """The head of every run's view: state badge and label (or ``title``), ``run `ID` · kind · state``,
    progress with Stop while it runs, the error of a failed run, a note on a cancelled one (``kept``:
    what of it is still shown)."""
    st.markdown(f"#### {BADGES.get(snap.state, '')} {md_text(title or snap.label)}")
    st.caption(f"run `{snap.id}` · {snap.kind} · {snap.state}" + (" · from the cache" if snap.cached else "")
               + caption_extra)
    if not snap.is_final:
        progress_with_stop(snap, f"{key}-stop-{snap.id}", also_cancel=also_cancel)
        if snap.state == "queued":
            _waiting_for(snap)
    elif snap.state == "failed":
        st.error(f"This run failed: {snap.error}")
    elif snap.state in ("cancelled", "interrupted"):
        st.warning(f"This run was {snap.state} ({snap.error or 'no reason given'}). {kept}".strip())
    where = ran_where(snap.summary)
    if where:
        st.caption(where[0].upper() + where[1:])
    failed = (snap.summary or {}).get("failed") or {}
    if failed:
        first, why = next(iter(failed.items()))
        st.warning(f"{len(failed)} part(s) of this run failed on the cluster, e.g. {md_text(first)}: "
                   f"{md_text(why.rstrip('.'))}. The rest completed and is shown below.")
        if not viewer_mode() and snap.spec is not None and st.button(
                "Retry the failed parts", key=f"{key}-retry-{snap.id}",
                help="Runs it again; the finished parts are kept, only the failed ones are computed"):
            try:
                get_runner().submit(snap.kind, snap.spec, rerun=True)
            except StitchError as exc:
                show_error(exc)
            else:
                st.rerun()


def _waiting_for(snap: JobSnapshot) -> None:
    """A queued run's view: the jobs it waits for (the models it uses first), each with its progress."""
    ahead = get_runner().ahead_of(snap.id)
    if not ahead:
        return
    makes = [s for s in ahead if s.id in snap.waits_for]
    left = _time_left(ahead)
    starts = f" · it starts in about {format_duration(left)}" if left is not None else ""
    with st.container(border=True):
        if makes:
            others = len(ahead) - len(makes)
            st.markdown("**Waiting for its models to train**" + (f" (and {others} other job(s) before it)" if others
                                                                 else "") + starts)
        else:
            st.markdown(f"**Queued behind {len(ahead)} job(s)**{starts}")
        for other in ahead:
            role = " · a model this run uses" if other.id in snap.waits_for else ""
            st.markdown(f"[{md_text(other.label)}]({run_link(other)}){role}")
            st.progress(other.progress, text=progress_text(other, other.state if other.state == "queued" else None))


def _time_left(jobs: list[JobSnapshot]) -> float | None:
    """Seconds until ``jobs`` (run in order) are all done: running ones by their ETA, queued ones by their
    estimate (a model a running job trains stands in untrained); None when any is unknown."""
    running = [s for s in jobs if s.state == "running"]
    etas = [s.eta_seconds() for s in running]
    if any(eta is None for eta in etas):
        return None
    queued = [(s.kind, s.spec) for s in jobs if s.state == "queued"]
    if not queued:
        return sum(etas)
    try:
        est = estimate_plan(queued, get_store(), also_pending=[(s.kind, s.spec) for s in running], wait=False,
                            threads=get_runner().cpu_threads)
    except Exception:  # estimate_plan never raises; a bug here must not take the run view down
        log.exception("estimating the queue failed")
        return None
    return None if est is None else est.seconds + sum(etas)


_FIGURES: OrderedDict[tuple, tuple[tuple, float, Any]] = OrderedDict()  # key -> (points key, built, figure)
_FIGURES_LOCK = threading.Lock()
FIGURES_KEPT = 64


def points_key(metrics: dict[str, list[tuple[int, float]]]) -> tuple:
    """What changes when a run logs a point: each series' name, length and last point.

    >>> points_key({"loss": [(1, 2.0), (2, 1.5)]})
    (('loss', 2, (2, 1.5)),)
    """
    return tuple((name, len(pts), tuple(pts[-1]) if pts else None) for name, pts in sorted(metrics.items()))


def live_figure(key: tuple, metrics: dict[str, list[tuple[int, float]]], build: Callable[[], Any], *,
                live: bool) -> Any:
    """The figure of ``key`` (("curve", run_id) ...), shared by every session that draws it.

    Built again only when ``metrics`` gained points and, while the run is ``live``, at most once per
    POLL_SECONDS: ten sessions polling a run that logs a hundred points a second share one figure a
    second instead of building ten.  A finished run's figure always has every point.  Figures are
    read-only once built; the newest FIGURES_KEPT are kept.
    """
    version, now = points_key(metrics), time.monotonic()
    with _FIGURES_LOCK:
        hit = _FIGURES.get(key)
        if hit is not None and (hit[0] == version or live and now - hit[1] < POLL_SECONDS):
            _FIGURES.move_to_end(key)
            return hit[2]
    figure = build()
    with _FIGURES_LOCK:
        _FIGURES[key] = (version, now, figure)
        _FIGURES.move_to_end(key)
        while len(_FIGURES) > FIGURES_KEPT:
            _FIGURES.popitem(last=False)
    return figure


def chart(where: Any, fig: Any, *, key: str, file_name: str | None = None) -> None:
    """A plotly figure with the house toolbar (:data:`CHART_CONFIG`) and, given ``file_name``, a download of
    its numbers as CSV under it (``figure_csv``, made as it is drawn: see :func:`made_download` for why)."""
    where.plotly_chart(fig, key=key, config=CHART_CONFIG)
    if file_name:
        title = fig.layout.title.text or "figure"
        where.download_button(f"CSV: {title}", figure_csv(fig), file_name=file_name, mime="text/csv",
                              icon=":material/download:", key=f"{key}-csvdl", on_click="ignore")  # fmt: skip


def _draw_run(snap: JobSnapshot, key: str) -> None:
    live = not snap.is_final
    run_header(snap, key, kept="Its curve so far is kept below.")
    if snap.state == "done" and snap.summary:
        if snap.kind == "stitch":
            _stitch_card(snap.summary, key)
        elif snap.kind == "zoo":
            _zoo_card(snap.summary)
    if snap.metrics or not snap.is_final:
        fig = live_figure(("curve", snap.id), snap.metrics,
                          lambda: plots.training_curves(snap.metrics, title="Training curve",
                                                        most=LIVE_CURVE_POINTS if live else CURVE_POINTS), live=live)
        st.plotly_chart(fig, key=f"{key}-curve-{snap.id}", config=CHART_CONFIG)  # its CSV: "Metrics CSV" below
    if snap.is_final:
        downloads(snap, key)


def _stitch_card(s: dict[str, Any], key: str) -> None:
    base_role = s.get("penalty_base", "b").upper()
    c = st.columns(5)
    c[0].metric("Stitched accuracy", f"{s['accuracy']:.1%}")
    c[1].metric("Model A", f"{s['base']['a']:.1%}")
    c[2].metric("Model B", f"{s['base']['b']:.1%}")
    c[3].metric(f"Penalty ({base_role} − stitched)", f"{s['penalty'] * 100:+.1f} pts",
                help=f"{base_role}'s accuracy minus the stitched model's: {penalty_words(True)} (positive: the "
                     "stitched model is worse; negative: it beats the base)")
    c[4].metric("Time", f"{s.get('seconds', 0):.1f} s")
    resid = s.get("lstsq_residual")
    st.caption(
        f"Adapter: {s['params']:,} parameters · {s['flops']:,} FLOPs per example"
        + (f" · lstsq residual {resid:.3f}" if resid is not None else "")
        + f" · A[{s['cut_a']['name']}] {tuple(s['cut_a']['shape'])} → B[{s['cut_b']['name']}]"
        f" {tuple(s['cut_b']['shape'])} · {s.get('n_train', '?')} train / {s.get('n_test', '?')} test images"
    )
    left, right = st.columns(2)
    chart(left, plots.accuracy_bars(s), key=f"{key}-acc", file_name="accuracy.csv")
    chart(right, plots.per_class_bars(s), key=f"{key}-pc", file_name="per-class.csv")


def _zoo_card(s: dict[str, Any]) -> None:
    st.markdown(f"Model **`{s['ref']}`** ({s['arch']} on {s['dataset']})")
    c = st.columns(3)
    c[0].metric("Test accuracy", f"{s['accuracy']:.1%}")
    c[1].metric("Parameters", f"{s['params']:,}")
    c[2].metric("Sparsity", f"{s.get('sparsity', 0.0):.0%}")


def bundle_bytes(store: Store, *run_ids: str) -> bytes:
    """The runs as one bundle zip (``runs export --with-models``; without the models when one is gone)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bundle.zip"
        try:
            export_bundle(store, list(run_ids), out, with_models=True)
        except StitchError:  # e.g. a zoo model one used was deleted: the runs alone still travel
            export_bundle(store, list(run_ids), out)
        return out.read_bytes()


def made_download(where: Any, label: str, make: Callable[[], bytes], *, file_name: str, mime: str, key: str,
                  icon: str, help: str, disabled: bool = False) -> None:  # fmt: skip
    """A download whose file takes a while to make (a bundle, a report): ``label`` ("Download bundle") makes
    it on click, then "Save bundle · 84.2 kB" serves the bytes this session now holds (``key`` names them:
    make it say what they hold, e.g. the run ids and when they ended).

    Not Streamlit's deferred download (a callable as ``data``): the file that makes lives only until two
    script runs of *any* session have ended, and every open page's job monitor reruns every 2 s; with ten
    other sessions open, 11 downloads of 20 failed when the browser fetched 0.2 s late (none with none open).
    A file a download button holds stays while the button is drawn."""
    slot = where.empty()
    if key not in st.session_state and slot.button(label, key=f"{key}-make", icon=icon, help=help,
                                                   disabled=disabled):  # fmt: skip
        with st.spinner(f"Making {file_name} …"):
            try:
                st.session_state[key] = make()
            except Exception as exc:  # e.g. a run deleted meanwhile: one red line, the page goes on
                show_error(exc, f"making {file_name}")
                return
    data = st.session_state.get(key)
    if data is not None:
        size = f"{len(data) / 1e3:,.1f} kB" if len(data) < 1e6 else f"{len(data) / 1e6:,.1f} MB"
        slot.download_button(f"Save {label.removeprefix('Download ')} · {size}", data, file_name=file_name,
                             mime=mime, key=f"{key}-save", icon=":material/download:", type="primary",
                             on_click="ignore", help=f"{file_name}: {help}")  # fmt: skip


def downloads(snap: JobSnapshot, key: str) -> None:
    """A finished run's downloads: its metrics as CSV, the run as JSON, as a bundle zip (with the zoo models
    it uses: ``runs import`` elsewhere) and as an HTML report that opens offline; the last two made on click."""
    rows = [(name, step, value) for name, pts in snap.metrics.items() for step, value in pts]
    csv = pd.DataFrame(rows, columns=["metric", "step", "value"]).to_csv(index=False)
    payload = {"id": snap.id, "kind": snap.kind, "state": snap.state, "label": snap.label,
               "summary": snap.summary, "error": snap.error, "metrics": snap.metrics}
    c = st.columns(4)
    c[0].download_button("Metrics CSV", csv, file_name=f"{snap.id}-metrics.csv", mime="text/csv",
                         key=f"{key}-csv-{snap.id}", on_click="ignore")
    c[1].download_button("Run JSON", json.dumps(payload, indent=2, default=str), file_name=f"{snap.id}.json",
                         mime="application/json", key=f"{key}-json-{snap.id}", on_click="ignore")
    store = get_store()
    now = store.lookup(snap.id)
    if now is None or now.status in ("queued", "running"):  # e.g. deleted meanwhile: nothing to bundle
        return
    held = f"{key}-{snap.id}-{now.finished}"  # a re-run of the run makes them anew
    made_download(
        c[2], "Download bundle", lambda: bundle_bytes(store, snap.id), file_name=f"stitchlab-{snap.id}.zip",
        mime="application/zip", icon=":material/archive:", key=f"{held}-bundle",
        help="This run with its curves, blobs and the zoo models it uses; import it on Results elsewhere"
             " (or `python -m stitchcore runs import FILE.zip`)",
    )  # fmt: skip
    made_download(
        c[3], "Download report", lambda: report_html(store, [snap.id]).encode(), file_name=f"stitchlab-{snap.id}.html",
        mime="text/html", icon=":material/description:", key=f"{held}-report",
        help="One HTML file that opens offline: the run's facts, numbers and interactive figures"
             " (`python -m stitchcore runs report ID --out FILE.html`)",
    )  # fmt: skip
