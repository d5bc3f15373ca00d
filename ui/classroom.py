"""A class's runs on this server: a lesson step's run launched for whoever opens it, students' own variants held
to the class's caps (:class:`stitchcore.jobs.quota.RunQuota`), and the variants the presenter sees live.

A lesson's own run is one run for the whole class (its id is its spec's hash), launched by whoever opens the step
first.  A student's variant (a changed open control) is another run: in class mode it goes through the quota,
at most :data:`STUDENT_LIVE` of one student's and ``$STITCHLAB_CLASS_LIVE_RUNS`` (default :data:`CLASS_LIVE`) of
the whole class's queued or running at once; beyond that it waits in the quota's line (the page says so), and
past the line it is refused with one line.  Outside class mode variants run at once, as before.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from stitchcore.errors import StitchError
from stitchcore.jobs.quota import QuotaTicket, RunQuota
from stitchcore.lessons import StepRun
from ui import roles
from ui.resources import server_runner

__all__ = ["CLASS_LIVE", "STUDENT_LIVE", "Variant", "class_quota", "launch_step", "note_variant", "owner_id",
           "variants", "waiting_words"]

STUDENT_LIVE = 1  # one student's variant runs queued or running at once
CLASS_LIVE = 3  # the whole class's (a 2-core server trains one at a time: more only lengthens its queue)
STUDENT_WAITING = 2  # one student's variants waiting for a turn
CLASS_WAITING = 30  # the class's waiting line
LIVE_ENV = "STITCHLAB_CLASS_LIVE_RUNS"
_OWNER = "_stitchlab_owner"  # session state: this browser session's id as an owner of runs


def _class_live() -> int:
    raw = os.environ.get(LIVE_ENV, "").strip()
    if not raw:
        return CLASS_LIVE
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 2 or not 1 <= int(raw) <= 64:
        raise StitchError(f"${LIVE_ENV} is a whole number from 1 to 64, not {raw!r}")
    return int(raw)


@st.cache_resource(show_spinner=False)
def class_quota() -> RunQuota:
    """The server's one quota over its job runner (students' variant runs in class mode)."""
    return RunQuota(server_runner(), per_owner=STUDENT_LIVE, total=_class_live(), per_owner_waiting=STUDENT_WAITING,
                    total_waiting=CLASS_WAITING)  # fmt: skip


def owner_id() -> str:
    """This browser session's id as the owner of the runs it launches (made once per session)."""
    state = st.session_state
    if _OWNER not in state:
        state[_OWNER] = uuid.uuid4().hex[:12]
    return state[_OWNER]


@dataclass(frozen=True)
class Variant:
    """A student's variant of a step: the values changed and the run they make."""

    values: dict[str, Any]  # open field -> the value asked for (held inside the step's controls)
    run_id: str
    owners: frozenset[str]  # the sessions that asked for it (how many students tried it)
    first: float  # when it was first asked for (time.time())


@dataclass
class _VariantLog:
    lock: threading.Lock = field(default_factory=threading.Lock)
    steps: dict[tuple[str, int], dict[str, Variant]] = field(default_factory=dict)


@st.cache_resource(show_spinner=False)
def _variant_log() -> _VariantLog:
    return _VariantLog()


def note_variant(lesson: str, run: StepRun) -> None:
    """Record that this session looks at ``run``, a variant of a step of ``lesson`` (launched here, or found in
    the store or queued by another), for the presenter's list; nothing for the lesson's own run."""
    if not run.changed:
        return
    owner = owner_id()
    log = _variant_log()
    with log.lock:
        seen = log.steps.setdefault((lesson, run.step.number), {})
        old = seen.get(run.run_id)
        owners = (old.owners if old else frozenset()) | {owner}
        seen[run.run_id] = Variant(dict(run.changed), run.run_id, owners, old.first if old else time.time())


def variants(lesson: str, step: int) -> list[Variant]:
    """The variants students asked for on this server for step ``step`` of ``lesson``, oldest first."""
    log = _variant_log()
    with log.lock:
        return sorted(log.steps.get((lesson, step), {}).values(), key=lambda v: v.first)


def launch_step(run: StepRun, lesson: str) -> QuotaTicket:
    """Queue a step's run with its models (what the store holds comes back at once).

    The lesson's own run (no changed control) is one run for the whole class and never re-run from here; a
    variant is recorded for the presenter and, in a student's session in class mode, goes through
    :func:`class_quota` (it may wait for a turn, or be refused with :class:`~stitchcore.jobs.quota.QuotaFull`).
    Raises :class:`StitchError` when a run cannot start.
    """
    runner = server_runner()
    if run.changed:
        note_variant(lesson, run)
        if roles.class_mode() and not roles.is_teacher():
            return class_quota().submit(owner_id(), run.plan())
    for kind, spec in run.plan():
        runner.submit(kind, spec)
    return QuotaTicket(run.run_id, waiting=False)


def waiting_words(run_id: str) -> str | None:
    """One line for a student's run that waits for a turn (None when it does not wait)."""
    quota = class_quota()
    ahead = quota.ahead_of(run_id)
    if ahead is None:
        return None
    before = f"{ahead} other run(s) wait before it" if ahead else "it is next"
    return (f"Your run waits for a turn: the class computes at most {quota.total} students' runs at once "
            f"(each student one), and {before}. It starts by itself; this page shows it then.")
