"""Who may do what in this browser session: class mode's teacher and students, checked where each action runs.

Outside class mode every session may do everything (viewer mode aside), as before.  Class mode is on when the
server has a teacher key: ``$STITCHLAB_TEACHER_KEY``, or one made at start by ``python -m stitchcore app
--class``, ``$STITCHLAB_CLASS=1`` or ``streamlit run app.py -- --class`` (printed on the server's console, as
Jupyter prints its token).  A browser becomes the teacher's by opening any page once with ``?key=KEY``: the key
leaves the address bar at once, and the browser keeps a cookie derived from it (an HMAC of the key, for 12 hours),
so a reload or a new tab stays the teacher's; every other browser session is a student's:

- it reaches only the lesson pages' student views (app.py refuses every other page: :func:`refuse_page`);
- :func:`allowed` is False for every action that writes (re-run, Stop, delete, import, lesson edits and
  uploads, settings, the presenter's Compute all steps), and each of those paths asks it before it writes;
- its runner (``ui.get_runner()``) is a :class:`StudentRunner`: it cannot cancel, re-run or change settings,
  and a student's "Run with these values" goes through the class's quota (``ui.classroom``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import sys
from typing import Any, ClassVar

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from stitchcore.errors import StitchError
from stitchcore.jobs import JobRunner, JobSnapshot
from stitchcore.links import CLASS_ENV, KEY_ENV

__all__ = ["CLASS_ENV", "KEY_ENV", "Refused", "StudentRunner", "allowed", "bad_key_note", "class_key", "class_mode",
           "in_session", "is_teacher", "refuse", "refuse_page", "remember_teacher", "take_teacher_key"]

log = logging.getLogger(__name__)

_ROLE = "_stitchlab_teacher"  # session state: the sha256 of the key this session opened a page with
_BAD_KEY = "_stitchlab_bad_key"  # session state: a wrong key was given (said once)
_SET_COOKIE = "_stitchlab_set_cookie"  # session state: the teacher's cookie is still to be written
COOKIE = "stitchlab_teacher"  # the teacher's browser: an HMAC of the key (never the key itself)
COOKIE_SECONDS = 12 * 3600  # a school day
_made_key: str | None = None  # the key made at start when class mode has none given (one per process)


class Refused(StitchError):
    """An action this session's role may not take (the message is one line, for the page)."""


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def class_key() -> str | None:
    """The teacher key, or None outside class mode; made (and printed on the server's console) the first time
    class mode asks for one without ``$STITCHLAB_TEACHER_KEY``."""
    global _made_key
    given = os.environ.get(KEY_ENV, "").strip()
    if given:
        return given
    if not (_truthy(os.environ.get(CLASS_ENV)) or "--class" in sys.argv[1:]):
        return None
    if _made_key is None:
        _made_key = secrets.token_urlsafe(16)
        print(f"StitchLab class mode. The teacher opens any page once with ?key={_made_key} "
              "(keep it to yourself; students' links never carry it).", file=sys.stderr, flush=True)  # fmt: skip
    return _made_key


def class_mode() -> bool:
    """True when this server runs a class (it has a teacher key)."""
    return class_key() is not None


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _cookie_token(key: str) -> str:
    """What the teacher's browser keeps: derived from the key, useless without it, never the key."""
    return hmac.new(key.encode(), b"stitchlab teacher cookie", hashlib.sha256).hexdigest()


def _cookie() -> str:
    try:
        return str(st.context.cookies.get(COOKIE) or "")
    except Exception:  # noqa: BLE001 - no browser (a test's AppTest): no cookies
        return ""


def _session() -> Any:
    """This script run's session state, or None outside one (bare mode, a worker thread: no browser session)."""
    if get_script_run_ctx(suppress_warning=True) is None:
        return None
    return st.session_state


def in_session() -> bool:
    """True inside a browser session's script run (where a role applies)."""
    return _session() is not None


def take_teacher_key() -> None:
    """app.py calls this first on every page: a ``?key=`` in the address makes this session the teacher's when
    it is the server's key; the key is taken out of the address either way (it is never shown)."""
    try:
        given = st.query_params.get("key")
    except Exception:  # noqa: BLE001 - outside a script run
        return
    if given is None:
        return
    del st.query_params["key"]
    key = class_key()
    if key is None:
        return  # not a class: nothing to unlock
    state = st.session_state
    if hmac.compare_digest(given.encode(), key.encode()):
        state[_ROLE] = _digest(key)
        state[_SET_COOKIE] = True
        state.pop(_BAD_KEY, None)
    else:
        state[_BAD_KEY] = True
        log.warning("a page was opened with a wrong teacher key")


def remember_teacher() -> None:
    """app.py, after the page's navigation: once a session has given the right key, write the teacher's cookie
    into the browser (a zero-height component; its script sets the cookie of this origin)."""
    state = _session()
    key = class_key()
    if state is None or key is None or not state.pop(_SET_COOKIE, False):
        return
    from streamlit.components.v1 import html

    html(f"<script>window.parent.document.cookie = '{COOKIE}={_cookie_token(key)}; path=/; "
         f"max-age={COOKIE_SECONDS}; SameSite=Strict';</script>", height=0)  # fmt: skip


def bad_key_note() -> str | None:
    """One line to show when this session gave a wrong key (once), else None."""
    state = _session()
    if state is not None and state.get(_BAD_KEY):
        del state[_BAD_KEY]
        return "That teacher key is not this server's: this browser follows the lesson as a student."
    return None


def is_teacher() -> bool:
    """True outside class mode (everyone may do everything) and in the teacher's session in class mode."""
    key = class_key()
    if key is None:
        return True
    state = _session()
    if state is None:
        return False
    if hmac.compare_digest(str(state.get(_ROLE, "")), _digest(key)):
        return True
    if hmac.compare_digest(_cookie().encode(), _cookie_token(key).encode()):  # the teacher's browser, reloaded or a new tab
        state[_ROLE] = _digest(key)
        return True
    return False


WORDS = {  # action -> how the refusal names it
    "page": "this page", "presenter": "the presenter's view", "edit": "editing a lesson",
    "upload": "adding a lesson file", "rerun": "running a run again", "stop": "stopping a run",
    "delete": "deleting runs", "import": "importing a bundle", "settings": "changing the settings",
    "compute": "computing the lesson's steps", "launch": "starting runs from this page",
}  # fmt: skip


def allowed(action: str) -> bool:
    """Whether this session may take ``action`` (a key of :data:`WORDS`): always outside class mode, only the
    teacher's session in it.  (Viewer mode is checked apart: it forbids jobs to everyone.)"""
    if action not in WORDS:
        raise KeyError(f"unknown action {action!r}; one of {', '.join(WORDS)}")
    return is_teacher()


def refuse(action: str) -> bool:
    """True, with one line on the page, when this session may not take ``action``: the path that writes asks
    this first and writes nothing when it is True."""
    if allowed(action):
        return False
    st.warning(f"This server runs a class: {WORDS[action]} is for the teacher. Nothing was changed.",
               icon=":material/lock:")  # fmt: skip
    return True


STUDENT_PAGES = ("lessons",)  # the pages a student reaches in class mode (their student views only)


def refuse_page(url_path: str) -> bool:
    """app.py: True (with one line and a link to the lessons) when a student opens a page other than a
    lesson's: the page does not run."""
    if url_path in STUDENT_PAGES or allowed("page"):
        return False
    st.warning("This server runs a class: students see only the lesson's steps. Open the link your teacher gave "
               "you, or pick a lesson below.", icon=":material/lock:")  # fmt: skip
    st.page_link("views/lessons.py", label="Lessons", icon=":material/school:")
    return True


class StudentRunner:
    """A student's view of the server's :class:`JobRunner`: it reads every job, and refuses what writes.

    Cancel, re-run, settings and Ray are refused with :class:`Refused`; a plain ``submit`` too: a student's runs
    go through the class's quota (``ui.classroom.launch_step``), which holds them to the lesson's steps.
    """

    _REFUSED: ClassVar[dict[str, str]] = {"cancel": "stopping a run", "set_options": "changing the settings",
                "stop_local_ray": "stopping Ray", "shutdown": "stopping the job runner"}  # fmt: skip

    def __init__(self, runner: JobRunner) -> None:
        self._runner = runner

    def submit(self, kind: str, spec: Any, *, rerun: bool = False, device: str | None = None) -> JobSnapshot:
        raise Refused("This server runs a class: students start only the lesson's runs, from the lesson's page.")

    def __getattr__(self, name: str) -> Any:
        if name in self._REFUSED:
            def refused(*args: Any, **kwargs: Any) -> Any:
                raise Refused(f"This server runs a class: {self._REFUSED[name]} is for the teacher.")

            return refused
        return getattr(self._runner, name)
