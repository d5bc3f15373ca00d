"""Runs on a page: the sidebar job monitor, run links, the live view of one run (progress with Stop, its
header, its curve, its kind's result card, downloads), and reruns when jobs that make models end.

A page passes the result cards of the kinds it may show (``cards``: kind -> card); ui never imports the
pages' views (views/run_views/ holds every kind's view and card).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

import streamlit as st
import torch

from stitchcore.backends import ran_where
from stitchcore.errors import StitchError
from stitchcore.experiments.estimate import estimate_plan, format_duration
from stitchcore.experiments.zoo_recipe import ZooRecipe
from stitchcore.jobs import JobSnapshot
from stitchcore.plots import runs as plots
from stitchcore.report.figures import CURVE_POINTS  # a finished run's curve: as in its report
from ui import roles
from ui.downloads import run_downloads
from ui.errors import show_error
from ui.figures import CHART_CONFIG, LIVE_CURVE_POINTS, live_figure, shown_figure
from ui.nav import PAGE_FOR_KIND, page_file
from ui.resources import POLL_SECONDS, device_label, get_runner, get_store, viewer_mode
from ui.text import code_span, plain, quote

__all__ = ["BADGES", "Card", "job_monitor", "live_while_running", "progress_text", "progress_with_stop",
           "linked_run", "rerun_when_jobs_finish", "run_header", "run_link", "run_view", "watch_kind"]

log = logging.getLogger(__name__)

Card = Callable[[dict[str, Any], str], None]  # a done run's result card: (its summary, the view's key prefix)


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
    except Exception as exc:  # noqa: BLE001 - a broken runner must not take the page down
        show_error(exc, "watching jobs")
        return

    @st.fragment(run_every=2.0 if watched else None)
    def _watch() -> None:
        if watched and any((s := runner.get(i)) is None or s.is_final for i in watched):
            st.rerun(scope="app")

    _watch()


def linked_run(run_id: str, kinds: tuple[str, ...], what: str) -> Any:
    """The stored run a page's ``?run=`` names when it is one of ``kinds`` (its record), else None with the
    reason shown: no such run, or a run of another kind with a link to it on Results (``what``: the page's
    kinds in words, "a language-model run")."""
    rec = get_store().lookup(run_id)
    if rec is None:
        st.error(f"No run {quote(run_id)} in the store at {plain(get_store().root)}.")
        return None
    if rec.kind not in kinds:
        st.info(f"Run {code_span(run_id)} is a {plain(rec.kind)} run, not {what}.")
        st.page_link(page_file("results"), label="Open it on Results", query_params={"run": run_id})
        return None
    return rec


def run_link(snap: JobSnapshot) -> str:
    """Relative URL of the page that shows this run (a permalink; the id URL-quoted, so a bundle's odd id stays
    inside a Markdown link's target)."""
    return f"{PAGE_FOR_KIND.get(snap.kind, 'results')}?{urlencode({'run': snap.id})}"


@st.fragment(run_every=2.0)
def job_monitor() -> None:
    """Sidebar: running and queued jobs with progress, each a link to its run."""
    runner = get_runner()
    active = runner.list(active_only=True)
    try:
        device = device_label()
    except Exception as exc:  # noqa: BLE001 - a bug finding the device must not take the sidebar down
        show_error(exc, "finding the device")
        device = "unknown"
    st.caption(f"Device: {plain(device)} · torch {torch.__version__.split('+')[0]}")
    if not active:
        st.caption("No jobs running.")
        return
    st.markdown(f"**Jobs ({len(active)})**")
    for snap in active[:8]:
        label = snap.label if len(snap.label) <= 72 else snap.label[:71] + "…"
        st.markdown(f"[{plain(label)}]({run_link(snap)})")
        st.progress(snap.progress, text=progress_text(snap, snap.state))


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


def run_view(run_id: str, *, key: str = "run", cards: Mapping[str, Card] | None = None) -> JobSnapshot | None:
    """The live view of one run: progress, Stop, curves; once done, the result card of its kind from
    ``cards`` (kind -> card; views/run_views' ``CARDS``: stitch and zoo).

    Polls with a fragment while the job is active and stops polling once it ends.
    """
    runner = get_runner()
    snap = runner.get(run_id)
    if snap is None:
        st.error(f"No run {quote(run_id)} in the store at {plain(get_store().root)}. It may have been deleted.")
        return None

    @live_while_running(run_id)
    def live() -> None:
        _draw_run(runner.get(run_id) or snap, key, cards or {})

    live()
    return snap


def live_run(run_id: str, key: str, body: Callable[[JobSnapshot], None], *, also: tuple[str | None, ...] = (),
             **header: Any) -> None:  # fmt: skip
    """A kind's live view: its header (``header``: :func:`run_header`'s options) and ``body(now)``, redrawn while
    the run (or one in ``also``: a similarity run beside a matrix) is active; its downloads once it has ended."""
    runner = get_runner()
    snap = runner.get(run_id)

    @live_while_running(run_id, *also)
    def live() -> None:
        now = runner.get(run_id) or snap
        run_header(now, key, **header)
        body(now)

    live()
    final = runner.get(run_id)
    if final is not None and final.is_final:
        run_downloads(final, key)


def progress_text(snap: JobSnapshot, what: str | None = None) -> str:
    """A progress bar's text: ``what`` (default: the job's message) · 42% · about 1 min 10 s left; the time
    left only once the job's progress rate means something (see JobSnapshot.eta_seconds)."""
    parts = [what or snap.message or snap.state, f"{snap.progress:.0%}"]
    eta = snap.eta_seconds()
    if eta is not None:
        parts.append(f"about {format_duration(eta)} left")
    return " · ".join(plain(p) for p in parts)


def progress_with_stop(snap: JobSnapshot, key: str, also_cancel: tuple[str | None, ...] = ()) -> None:
    """A running job's progress bar (with the time left) and its Stop button (which also cancels the
    ``also_cancel`` runs)."""
    cols = st.columns([5, 1])
    cols[0].progress(snap.progress, text=progress_text(snap))
    if cols[1].button("Stop", key=key, type="secondary", disabled=viewer_mode()) and not viewer_mode() and not roles.refuse("stop"):
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
    st.markdown(f"#### {BADGES.get(snap.state, '')} {plain(title or snap.label)}")
    origin = snap.origin_words()  # a stored result or an imported run: from where, run when
    st.caption(f"run {code_span(snap.id)} · {plain(snap.kind)} · {plain(snap.state)}"
               + (f" · {plain(origin)}" if origin else "") + caption_extra)
    if not snap.is_final:
        progress_with_stop(snap, f"{key}-stop-{snap.id}", also_cancel=also_cancel)
        if snap.state == "queued":
            _waiting_for(snap)
    elif snap.state == "failed":
        st.error(f"This run failed: {plain(snap.error)}")
    elif snap.state in ("cancelled", "interrupted"):
        st.warning(f"This run was {plain(snap.state)} ({plain(snap.error or 'no reason given')}). {kept}".strip())
    where = ran_where(snap.summary)
    if where:
        st.caption(plain(where[0].upper() + where[1:]))
    failed = (snap.summary or {}).get("failed") or {}
    if failed:
        first, why = next(iter(failed.items()))
        st.warning(f"{len(failed)} part(s) of this run failed on the cluster, e.g. {plain(first)}: "
                   f"{plain(str(why).rstrip('.'))}. The rest completed and is shown below.")
        if not viewer_mode() and snap.spec is not None and st.button(
                "Retry the failed parts", key=f"{key}-retry-{snap.id}",
                help="Runs it again; the finished parts are kept, only the failed ones are computed",
        ) and not roles.refuse("rerun"):
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
            st.markdown(f"[{plain(other.label)}]({run_link(other)}){role}")
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


def _draw_run(snap: JobSnapshot, key: str, cards: Mapping[str, Card]) -> None:
    live = not snap.is_final
    run_header(snap, key, kept="Its curve so far is kept below.")
    card = cards.get(snap.kind)
    if snap.state == "done" and snap.summary and card is not None:
        try:
            card(snap.summary, key)
        except Exception as exc:  # noqa: BLE001 - a summary no card expected (an old or foreign store's row)
            show_error(exc, "drawing the run's result")
    if not snap.is_final or plots.has_training_curve(snap.metrics):  # a finished 0-epoch run: no one-dot chart
        fig = live_figure(("curve", snap.id), snap.metrics,
                          lambda: shown_figure(plots.training_curves(snap.metrics, title="Training curve",
                                                                     most=LIVE_CURVE_POINTS if live else CURVE_POINTS)),
                          live=live)  # a bundle's series names are text
        st.plotly_chart(fig, key=f"{key}-curve-{snap.id}", config=CHART_CONFIG)  # its CSV: "Metrics CSV" below
    if snap.is_final:
        run_downloads(snap, key)

