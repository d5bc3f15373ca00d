"""How long a run takes on this machine, said right above its Launch button (``experiments/estimate.py``
times a few real steps; the page never waits for that)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

import streamlit as st

from stitchcore.errors import StitchError
from stitchcore.experiments.estimate import (
    Estimate,
    calibrating,
    describe_changes,
    estimate_plan,
    format_duration,
    quick_settings,
)
from ui.resources import get_runner, get_store

__all__ = ["LONG_RUN_SECONDS", "show_estimate", "show_plan_estimate"]

log = logging.getLogger(__name__)

LONG_RUN_SECONDS = 60.0  # estimates above this are drawn in the warning colour
CLUSTER_STARTUP_SECONDS = 30.0  # a Ray cluster's workers before their first task (34 s seen for a 2 s matrix)


def show_estimate(kind: str, spec: Any, form_keys: Mapping[str, str] | None = None) -> Estimate | None:
    """A caption for right above a Launch button: how long ``kind`` on ``spec`` takes on this machine.

    ":material/timer: About 6 min on this machine", in the warning colour above ~1 min; the basis of the
    estimate is in the caption's tooltip, with the job worker's start-up when it is still starting.  Shows
    nothing when it cannot be estimated (no spec yet, a model that does not load ...); never raises: an
    estimator failure is logged and the page goes on.

    The page never waits for a calibration: a quick one (a few examples) gives a first figure within
    seconds, said as such, and the full one refines it; the app reruns when either is in (widget values
    and session state stay).  ``form_keys`` (spec field -> the page's session key, e.g. ``{"epochs":
    "epochs"}``): past a minute, a button offers the quick settings (:func:`quick_settings`) with their
    own estimate, and sets those fields of the form in one click.
    """
    if spec is None:
        return None
    return show_plan_estimate([(kind, spec)], form_keys)


def show_plan_estimate(items: list[tuple[str, Any]], form_keys: Mapping[str, str] | None = None) -> Estimate | None:
    """As :func:`show_estimate` for runs queued one after the other (``[(kind, spec), ...]``, e.g. the
    classroom demo's two models and their stitch, a matrix and the measure beside it): the time of those not
    in the store yet.  ``form_keys`` name the form fields of the first run's spec (the quick settings)."""
    if not items or any(spec is None for _, spec in items):
        return None

    def compute(plan: list[tuple[str, Any]] = items) -> Estimate | None:
        return estimate_plan(plan, get_store(), wait=False, threads=get_runner().cpu_threads)

    what = "+".join(k for k, _ in items)
    est = _show_estimate(compute, what, on_cluster=any(_runs_on_cluster(k) for k, _ in items))
    if est is not None and not est.stored and est.seconds > LONG_RUN_SECONDS and form_keys:
        _offer_quick_settings(items, form_keys, compute)
    return est


def _offer_quick_settings(items: list[tuple[str, Any]], form_keys: Mapping[str, str],
                          compute: Callable[[list[tuple[str, Any]]], Estimate | None]) -> None:
    """One click to the quick settings of the first run (fewer epochs, capped images), with their own estimate."""
    (kind, spec), *rest = items
    changes = {k: v for k, v in quick_settings(spec).items() if k in form_keys}
    if not changes:
        return
    try:
        quick_est = compute([(kind, dataclasses.replace(spec, **changes)), *rest])
    except Exception:
        log.exception("estimating the quick settings failed")
        quick_est = None
    took = f" (about {format_duration(_with_startup(quick_est).seconds)})" if quick_est is not None else ""

    def use() -> None:
        for name, value in changes.items():
            st.session_state[form_keys[name]] = value

    st.button(f"Quick: {describe_changes(changes)}{took}", key=f"quick_settings_{kind}", on_click=use,
              icon=":material/bolt:", width="stretch",
              help="Use quick settings: a rougher result in a fraction of the time. The fields above change; "
                   "Launch stays yours.")


def _runs_on_cluster(kind: str) -> bool:
    """Whether a job of ``kind`` goes to Ray under the server's Settings (a char-GPT's training is a zoo job,
    and zoo jobs run here)."""
    try:
        options = get_runner().options_for(kind)
    except StitchError:
        return False
    return options is not None and options.backend != "local"


def _with_startup(est: Estimate | None) -> Estimate | None:
    """``est`` plus what is left of the job worker's start-up (0 once it is warm)."""
    if est is None or est.stored:
        return est
    try:
        startup = get_runner().startup_seconds()
    except Exception:
        log.exception("reading the worker's start-up failed")
        return est
    if startup <= 0:
        return est
    return est + Estimate(startup, startup / 2, startup * 1.5, f"{format_duration(startup)} for the job worker to start",
                          provisional=est.provisional)


def _with_cluster_startup(est: Estimate | None) -> Estimate | None:
    """``est`` plus the Ray workers' start-up when no job has run on the cluster yet (each worker imports torch
    and the library before its first task: ~30 s seen for a 2 s matrix on 2 cores)."""
    if est is None or est.stored or get_runner().cluster_warm():
        return est
    return est + Estimate(CLUSTER_STARTUP_SECONDS, CLUSTER_STARTUP_SECONDS / 3, CLUSTER_STARTUP_SECONDS * 1.5,
                          f"about {format_duration(CLUSTER_STARTUP_SECONDS)} for the cluster's workers to start "
                          "(the first cluster run after the server starts)", provisional=est.provisional)


def _show_estimate(
    compute: Callable[[], Estimate | None], what: str, *, on_cluster: bool = False
) -> Estimate | None:
    try:
        est = _with_startup(compute())
        if on_cluster:
            est = _with_cluster_startup(est)
    except Exception:  # an estimate is a courtesy: it must never take a page down
        log.exception("estimating %s failed", what)
        return None
    if est is not None:
        _draw_estimate(est, on_cluster=on_cluster)
        if not est.provisional:
            return est
    elif not calibrating():
        return None  # nothing to say: it cannot be estimated
    first = est is None

    @st.fragment(run_every=1.0)
    def waiting() -> None:
        try:
            now = compute()
            done = not calibrating() or (now is not None and (first or not now.provisional))
        except Exception:
            log.exception("estimating %s failed", what)
            return
        if done:
            st.rerun(scope="app")  # the page draws the estimate (or nothing) where it belongs; polling stops
        if first:
            st.caption(":material/timer: Estimating how long this takes on this machine …")

    waiting()
    return est


def _draw_estimate(est: Estimate, *, on_cluster: bool = False) -> None:
    """The estimate's caption; ``on_cluster``: the run goes to Ray (Settings), whose tasks run side by side,
    so the time is what this machine alone would take, said as such."""
    if est.stored:
        st.caption(":material/bolt: In the store already: opens at once.")
        return
    text = f":material/timer: About {format_duration(est.seconds)} on this machine"
    if est.provisional:
        text += " (a first figure; timing more steps …)"
    if on_cluster:
        text += "; the Ray cluster runs its parts side by side"
    if est.seconds > LONG_RUN_SECONDS:
        text = f":orange[{text} · it runs in the background]"
    cluster = (" It runs on the Ray cluster (Settings): its parts run side by side, shorter by up to the"
               " cluster's number of task slots." if on_cluster else "")
    st.caption(text, help=f"Estimate ({format_duration(est.low)} to {format_duration(est.high)}), {est.basis}."
                          f"{cluster} Jobs run in the background: you can leave the page.")
