"""How long a run takes on this machine, said right above its Launch button (``experiments/estimate.py``
times a few real steps; the page never waits for that)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import streamlit as st

from stitchcore.errors import StitchError
from stitchcore.experiments.estimate import (
    Estimate,
    calibrating,
    estimate_plan,
    estimate_seconds,
    format_duration,
)
from ui.resources import get_runner, get_store

__all__ = ["LONG_RUN_SECONDS", "show_estimate", "show_plan_estimate"]

log = logging.getLogger(__name__)

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

