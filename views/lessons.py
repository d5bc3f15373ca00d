"""Lessons: a teacher's sequence of stitching runs, one link a whole class can follow.

``lessons`` lists the lessons (the shipped ones and the store's own) and takes a lesson file.
``lessons?lesson=NAME&step=K`` opens step K as a student sees it: the step's text, its result (from the store,
else queued once: thirty students opening a step share one run), the controls the lesson opens and nothing
else (app.py hides the sidebar).  ``&view=presenter`` is the teacher's view: every step's state, Compute all
steps, the students' link; ``&view=edit`` the editor (views/lesson_edit.py).  Any other parameter is an open
control (``&epochs=3``), held inside the step's range with a visible note; a changed control is another run,
drawn beside the lesson's own.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import streamlit as st

import ui
from stitchcore.errors import StitchError
from stitchcore.jobs.quota import QuotaFull
from stitchcore.lessons import (
    Lesson,
    LessonError,
    Step,
    StepRun,
    catalog,
    compare_runs,
    get_lesson,
    lesson_json,
    lesson_progress,
    missing_models,
    read_lesson,
    run_numbers,
    save_lesson,
    step_run,
)
from stitchcore.lessons.lesson import RESERVED, Control, get_field
from stitchcore.measures.meaning import explain
from ui import classroom, roles
from ui.runs import BADGES
from ui.serving import listens_locally, public_base_url, qr_png
from views import lesson_edit, run_views

STATE_BADGES = {None: ":material/radio_button_unchecked:", **BADGES}
STATE_WORDS = {None: "not computed yet", "done": "computed", "running": "running", "queued": "queued",
               "failed": "failed", "cancelled": "stopped", "interrupted": "interrupted"}  # fmt: skip


def _link(lesson: Lesson, step: int, *, presenter: bool = False, values: dict[str, Any] | None = None) -> dict:
    """The query parameters of a step's link (``lesson``, ``step``, ``view``, open controls)."""
    params = {"lesson": lesson.name, "step": str(step), **({"view": "presenter"} if presenter else {})}
    return {**params, **{k: str(v) for k, v in (values or {}).items()}}


def _student_url(lesson: Lesson, step: int) -> str:
    """The full address students open: this server's as other machines reach it (ui.serving), never localhost."""
    return f"{public_base_url()}/lessons?{urlencode(_link(lesson, step))}"


def _launch(run: StepRun, lesson: Lesson) -> bool:
    """Queue a step's models and its run (what the store holds comes back at once; a student's variant in class
    mode through the class's caps, ui.classroom); False after an error or a refusal, said on the page."""
    try:
        classroom.launch_step(run, lesson.name)
    except QuotaFull as exc:
        st.warning(f"Your run cannot start now: {exc}", icon=":material/hourglass_disabled:")
        return False
    except StitchError as exc:
        ui.show_error(exc, f"starting step {run.step.number}")
        return False
    return True


# ------------------------------------------------------------------------------------------------ catalog


def _catalog() -> None:
    st.title("Lessons")
    st.caption("A lesson is a short sequence of runs with text for the class, one link per step. Students see "
               "only the step, its result and the controls the lesson opens; the teacher presents.")  # fmt: skip
    store = ui.get_store()
    lessons, problems = catalog(store)
    for problem in problems:
        st.error(f"A lesson file in the store does not read: {ui.plain(problem)}")
    for lesson in lessons:
        states = lesson_progress(lesson, store)
        done = sum(s == "done" for s in states)
        with st.container(border=True):
            st.markdown(f"#### {ui.plain(lesson.title)}")
            st.markdown(lesson.summary)  # the teacher's Markdown, on purpose
            st.caption(f"{ui.code_span(lesson.name)} · {len(lesson.steps)} steps · {done} of {len(states)} computed")
            left, right, _ = st.columns([1, 1, 3])
            if roles.allowed("presenter") and left.button("Present", icon=":material/co_present:",
                                                          key=f"present-{lesson.name}", type="primary"):  # fmt: skip
                _go(lesson, 1, presenter=True)
            if right.button("Follow as a student", icon=":material/school:", key=f"follow-{lesson.name}"):
                _go(lesson, 1, presenter=False)
    if not ui.viewer_mode() and roles.allowed("upload"):
        with st.expander("Add a lesson file"):
            upload = st.file_uploader("Lesson file (JSON)", type=["json"], key="lesson_upload")
            if upload is not None and not roles.refuse("upload"):
                try:
                    lesson = save_lesson(read_lesson(upload.getvalue(), where=upload.name), store)
                except LessonError as exc:
                    ui.show_error(exc)
                else:
                    st.success(f"Saved lesson {ui.quote(lesson.name)} into the store: it is listed above after a "
                               "reload.")


# -------------------------------------------------------------------------------------------------- a step


def _control_widget(control: Control, value: Any, key: str) -> Any:
    """One open control's widget, set to ``value``; returns what the user picked."""
    label, help_ = ui.plain(control.label), control.help or None  # help: the teacher's Markdown
    if control.choices is not None:
        options = list(control.choices)
        return st.selectbox(label, options, index=options.index(value), help=help_, key=key,
                            format_func=str)  # fmt: skip
    assert control.low is not None and control.high is not None
    if control.integer:
        return st.slider(label, int(control.low), int(control.high), int(value), help=help_, key=key)
    return st.slider(label, float(control.low), float(control.high), float(value), help=help_, key=key)


def _controls(step: Step, run: StepRun, key: str) -> None:
    """The controls the step opens, in a form; submitting puts the values in the link (which runs them)."""
    if not step.open:
        return
    shown = "-".join(f"{f}={v}" for f, v in sorted(run.changed.items()))  # widgets start again from a new link
    with st.form(f"{key}-form", border=True):
        st.markdown("**Try it yourself** " + ", ".join(ui.plain(f"({c.label}: {c.describe()})") for c in step.open))
        picked = {c.field: _control_widget(c, run.changed.get(c.field, _own(step, c)), f"{key}-{c.field}-{shown}")
                  for c in step.open}  # fmt: skip
        cols = st.columns([1, 1, 3])
        results_only = ui.viewer_mode(of_server=True)
        go = cols[0].form_submit_button("Run with these values", type="primary", disabled=results_only)
        back = cols[1].form_submit_button("Back to the lesson's values", disabled=not run.changed)
        if results_only:
            cols[2].caption("This server shows precomputed results only (viewer mode): values can be chosen, "
                            "but only the teacher's computed runs are shown.")  # fmt: skip
    if go or back:
        own = {c.field: _own(step, c) for c in step.open}
        values = {} if back else {f: v for f, v in picked.items() if v != own[f]}
        keep = {k: v for k, v in st.query_params.to_dict().items() if k in RESERVED}
        st.query_params.from_dict({**keep, **{f: str(v) for f, v in values.items()}})
        st.rerun()


def _own(step: Step, control: Control) -> Any:
    return get_field(step.spec, control.field)


def _waiting(run: StepRun, lesson: Lesson, key: str) -> None:
    """A student's run that waits for a turn (class mode): the line's words, redrawn every 2 s; the page runs
    again once it has started (or the quota refused it when its turn came)."""

    @st.fragment(run_every=ui.POLL_SECONDS)
    def line() -> None:
        words = classroom.waiting_words(run.run_id)
        if words is None:
            st.rerun(scope="app")
        st.info(words, icon=":material/hourglass_top:")

    if error := classroom.class_quota().error(run.run_id):
        ui.show_error(StitchError(error), f"starting step {run.step.number}")
        return
    line()


def _draw_run(run: StepRun, lesson: Lesson, key: str, *, auto: bool) -> None:
    """A step's run: drawn by its kind's view once the store has it; queued once when it does not (``auto``)."""
    store = ui.get_store()
    rec = store.lookup(run.run_id)
    if rec is None:
        if ui.viewer_mode(of_server=True):
            st.info("This step has not been computed on this server, which shows results only. The teacher "
                    f"computes the lesson first: {ui.code_span(f'python -m stitchcore lessons run {lesson.name}')}.")
            return
        if not auto or not _launch(run, lesson):
            return
        rec = store.lookup(run.run_id)
        if rec is None and classroom.waiting_words(run.run_id) is not None:
            _waiting(run, lesson, key)
            return
        if rec is None:  # another process runs it (RunBusy): the job waits for it
            st.info("Queued: another process is computing this step.")
            return
    elif (rec.status in ("failed", "cancelled", "interrupted") and not ui.viewer_mode(of_server=True)
          and roles.allowed("rerun") and st.button("Run this step again", key=f"{key}-again-{run.run_id}")):  # fmt: skip
        if not roles.refuse("rerun") and _launch(run, lesson):
            st.rerun()
    beside = run.step.beside
    if run.kind == "matrix" and beside is not None:
        run_views.matrix_view(rec, key=key, cka_id=step_run(lesson.step(beside)).run_id)
    else:
        run_views.VIEWS[run.kind](rec, key=key)


def _presenter_bar(lesson: Lesson, number: int) -> None:
    """The teacher's overview: each step's state (a button to it) and the students' variants, live; Compute all
    steps; the students' link and its QR code; the lesson file and Edit."""
    _presenter_live(lesson, number)
    left, right = st.columns([3, 1])
    url = _student_url(lesson, number)
    left.markdown("**Students' link** (only the step and what it opens):")
    left.code(url, language=None)
    if listens_locally():
        left.caption(":material/warning: This server listens on this machine only, so students' machines cannot open "
                     "the link: for a class, start it with `python -m stitchcore app --class` (README, Teaching).")
    if url.startswith("http"):
        right.image(qr_png(url), caption="The students' link", width=160)
    c = st.columns([3, 2, 4])
    c[0].download_button("Download the lesson file", lesson_json(lesson), file_name=f"{lesson.name}.json",
                         mime="application/json", key="lesson-download", icon=":material/download:")  # fmt: skip
    if c[1].button("Edit the lesson", key="lesson-edit", icon=":material/edit:", disabled=ui.viewer_mode()):
        if not roles.refuse("edit"):
            st.query_params.from_dict({"lesson": lesson.name, "view": "edit"})
            st.rerun()


def _presenter_live(lesson: Lesson, number: int) -> None:
    """Each step's state and this step's students' variants, redrawn every ``POLL_SECONDS`` (the class moves on
    without a reload)."""

    @st.fragment(run_every=ui.POLL_SECONDS)
    def live() -> None:
        store = ui.get_store()
        states = lesson_progress(lesson, store)
        cols = st.columns(len(lesson.steps))
        for col, step, state in zip(cols, lesson.steps, states, strict=True):
            if col.button(f"{step.number}. {ui.plain(step.title)}", icon=STATE_BADGES.get(state),
                          key=f"lesson-goto-{step.number}", help=STATE_WORDS.get(state, state),
                          disabled=step.number == number, use_container_width=True):  # fmt: skip
                _go(lesson, step.number, presenter=True)
        left, right = st.columns([1, 3])
        done = sum(s == "done" for s in states)
        left.caption(f"{done} of {len(states)} steps computed")
        if left.button("Compute all steps", disabled=ui.viewer_mode() or done == len(states),
                       help="Queues every step's runs now (models first), so the class finds them in the store"):  # fmt: skip
            if not roles.refuse("compute"):
                for step in lesson.steps:
                    if not _launch(step_run(step), lesson):
                        break
                st.rerun()
        with right:
            _variants_table(lesson, lesson.step(number))

    live()


def _variants_table(lesson: Lesson, step: Step) -> None:
    """The students' variants of ``step`` beside the lesson's own run: values, how many asked, state, numbers."""
    tried = classroom.variants(lesson.name, step.number)
    if not step.open:
        return
    if not tried:
        st.caption("No student has tried other values on this step yet.")
        return
    store = ui.get_store()
    students = len(set().union(*(v.owners for v in tried)))
    st.markdown(f"**Students' runs**: {len(tried)} variant(s) from {students} student(s)")
    rows = [("The lesson's values", 0, step_run(step).run_id)]
    rows += [(_values_words(step, var.values), len(var.owners), var.run_id) for var in tried]
    table: dict[str, list[str]] = {"Values": [], "Students": [], "State": []}
    numbers: list[dict[str, str]] = []
    own = store.lookup(rows[0][2])
    for values, count, run_id in rows:
        rec = store.lookup(run_id)
        table["Values"].append(ui.plain(values))  # st.table reads Markdown
        table["Students"].append(str(count) if count else "")
        waits = rec is None and classroom.waiting_words(run_id) is not None
        state = rec.status if rec is not None else ("waiting for a turn" if waits else "not started")
        table["State"].append(STATE_WORDS.get(state, state))
        done = rec is not None and rec.status == "done" and own is not None and own.status == "done"
        numbers.append({ui.plain(label): ui.plain(theirs) for label, _, theirs in compare_runs(own, rec)}
                       if done else {})  # fmt: skip
    for label in dict.fromkeys(k for n in numbers for k in n):
        table[label] = [n.get(label, "") for n in numbers]
    st.table(table)


def _values_words(step: Step, values: dict[str, Any]) -> str:
    """``Adapter training epochs = 0, Cut in A = block1``: each open control by its label."""
    return ", ".join(f"{c.label if (c := step.control(f)) is not None else f} = {v}" for f, v in values.items())


def _every_lesson() -> None:
    if st.button("Every lesson", icon=":material/list:", key="lesson-catalog"):
        st.query_params.clear()
        st.rerun()


def _step_text(step: Step) -> None:
    """The step's Markdown, each ``{{name}}`` shown as that number's name with the lesson's own run's value once
    it is computed, and what each means under it."""
    st.markdown(step.markdown(run_numbers(ui.get_store().lookup(step_run(step).run_id))))
    for name in step.meanings:
        st.caption(explain(name))


def _compare(own: StepRun, mine: StepRun) -> None:
    """The two runs' headline numbers with their intervals in one table, whole (a sweep: the penalty at each
    cut); the cards beside each other are narrow."""
    store = ui.get_store()
    recs = [store.lookup(own.run_id), store.lookup(mine.run_id)]
    if any(r is None or r.status != "done" for r in recs):
        return
    rows = compare_runs(recs[0], recs[1])
    st.table({"": [ui.plain(r[0]) for r in rows], "The lesson's run": [ui.plain(r[1]) for r in rows],  # Markdown:
              "Your run": [ui.plain(r[2]) for r in rows]})  # a sweep's cut names are text  # fmt: skip


def _go(lesson: Lesson, number: int, presenter: bool) -> None:
    """Open step ``number`` (its own values: a student's changes stay with their step) and rerun."""
    st.query_params.from_dict(_link(lesson, number, presenter=presenter))
    st.rerun()


def _step_nav(lesson: Lesson, number: int, presenter: bool, where: str) -> None:
    """Previous / Next (buttons: a link to the page already open does not run it again)."""
    left, mid, right = st.columns([1, 3, 1])
    if number > 1 and left.button("Previous", icon=":material/arrow_back:", key=f"lesson-prev-{where}"):
        _go(lesson, number - 1, presenter)
    mid.caption(f"Step {number} of {len(lesson.steps)}")
    if number < len(lesson.steps) and right.button("Next", icon=":material/arrow_forward:", type="primary",
                                                   key=f"lesson-next-{where}"):  # fmt: skip
        _go(lesson, number + 1, presenter)


def _step_number(raw: str, steps: int) -> int | None:
    """The step a link's ``step=`` names, or None when it names none of 1 .. ``steps`` (``²``, a 5,000-digit
    number, ``-1``).

    (``_step_number("2", 3)`` is 2; ``"²"``, ``"0"`` and ``"9" * 5000`` are None: tests/test_app_bad_urls.py.)
    """
    if not (raw.isascii() and raw.isdigit()) or len(raw) > len(str(steps)):
        return None
    return int(raw) if 1 <= int(raw) <= steps else None


def _lesson(name: str) -> None:
    params = st.query_params.to_dict()
    view = params.get("view")
    if view in ("presenter", "edit") and roles.refuse("presenter" if view == "presenter" else "edit"):
        view = None  # a student's session: the student view, whatever the link says
    presenter = view == "presenter"
    store = ui.get_store()
    try:
        lesson = get_lesson(name, store)
    except LessonError as exc:
        ui.show_error(exc)
        _every_lesson()
        return
    raw_step = params.get("step", "1")
    number = _step_number(raw_step, len(lesson.steps))
    if number is None:
        st.warning(f"This lesson has steps 1 to {len(lesson.steps)}, not {ui.quote(raw_step)}: showing step 1.")
        number = 1
    step = lesson.step(number)
    st.title(ui.plain(lesson.title))
    if view == "edit":
        _every_lesson()
        lesson_edit.editor(lesson)
        return
    if presenter:
        _every_lesson()
        _presenter_bar(lesson, number)
    if problems := missing_models(lesson, store):
        for problem in problems:
            st.error(ui.plain(problem))
    if number == 1:
        st.markdown(lesson.summary)  # the teacher's Markdown, on purpose
    _step_nav(lesson, number, presenter, "top")
    st.subheader(f"{number}. {ui.plain(step.title)}")
    _step_text(step)
    given = {k: v for k, v in params.items() if k not in RESERVED}
    try:
        own = step_run(step)
        mine = step_run(step, given)
    except LessonError as exc:
        ui.show_error(exc)
        return
    for note in mine.notes:
        st.warning(f"From the link: {ui.plain(note, ui.errors.MOST_CHARS)}.")
    _controls(step, mine, f"lesson-{lesson.name}-{number}")
    classroom.note_variant(lesson.name, mine)  # the presenter lists it, computed here or already stored
    if mine.changed:
        _compare(own, mine)
        left, right = st.columns(2)
        with left:
            st.markdown("##### The lesson's run")
            _draw_run(own, lesson, f"own-{number}", auto=True)
        with right:
            changed = _values_words(step, mine.changed)
            st.markdown(f"##### Your run ({ui.plain(changed)})")
            _draw_run(mine, lesson, f"mine-{number}", auto=True)
    else:
        _draw_run(own, lesson, f"own-{number}", auto=True)
    _step_nav(lesson, number, presenter, "bottom")


ui.page_setup("Lessons")
_name = st.query_params.get("lesson")
if _name:
    _lesson(_name)
else:
    _catalog()
