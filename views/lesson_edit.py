"""The lesson editor (``lessons?lesson=NAME&view=edit``) and "Add to a lesson" (a run opened on Results).

Not a page: the Lessons and Results pages call these.  A draft is the lesson file's dict, kept in the session
until it is saved into the store (``stitchcore.lessons.save_lesson`` checks it whole; its message names the
step and the field); nothing here runs anything.
"""

from __future__ import annotations

import hashlib
from typing import Any

import streamlit as st

import ui
from stitchcore.errors import StitchError
from stitchcore.experiments.field_words import field_words
from stitchcore.lessons import (
    Lesson,
    LessonError,
    add_run,
    catalog,
    get_lesson,
    lesson_json,
    lesson_progress,
    lesson_report,
    move_step,
    new_lesson,
    parse_lesson,
    remove_step,
    save_lesson,
)
from stitchcore.lessons.editing import (
    choice_values,
    choices_text,
    control_words,
    default_choices,
    default_range,
    openable_fields,
)
from stitchcore.lessons.lesson import get_field
from stitchcore.store.results import RunRecord
from ui import roles

__all__ = ["add_to_lesson", "editor"]

NEW = "A new lesson"


def add_to_lesson(rec: RunRecord, key: str) -> None:
    """An expander that adds the run as the last step of a lesson (a store lesson, a shipped one copied into the
    store, or a new one), then offers the editor."""
    if ui.viewer_mode() or rec.status != "done":
        return
    with st.expander("Add to a lesson", icon=":material/school:"):
        lessons, _ = catalog(ui.get_store())
        names = [NEW, *(lesson.name for lesson in lessons)]
        target = st.selectbox("Lesson", names, key=f"{key}-lesson-target")
        if target == NEW:
            c = st.columns(2)
            name = c[0].text_input("Name (its link and file name)", key=f"{key}-lesson-name",
                                   placeholder="e.g. my-first-lesson")  # fmt: skip
            title = c[1].text_input("Title", key=f"{key}-lesson-title", placeholder="What the class will see")
        if st.button("Add as the last step", key=f"{key}-lesson-add", type="primary") and not roles.refuse("edit"):
            try:
                if target == NEW:
                    if not name or not title:
                        raise LessonError("give the new lesson a name and a title")
                    if name in names:
                        raise LessonError(f"a lesson {name!r} exists already: pick it above to add to it")
                    draft = new_lesson(name.strip(), title.strip())
                else:
                    draft = get_lesson(target, ui.get_store()).to_dict()
                lesson = save_lesson(add_run(draft, rec), ui.get_store())
            except StitchError as exc:
                ui.show_error(exc)
                return
            st.session_state.pop(_draft_key(lesson.name), None)  # the editor starts from what was saved
            st.success(f"Added as step {len(lesson.steps)} of {ui.quote(lesson.title)}.")
            st.page_link(ui.page_file("lessons"), label="Write its text and open controls in the editor",
                         icon=":material/edit:", query_params={"lesson": lesson.name, "view": "edit"})  # fmt: skip


def _draft_key(name: str) -> str:
    return f"lesson-draft-{name}"


def _range_inputs(kind: str, field: str, value: float, current: dict[str, Any], key: str) -> dict[str, Any]:
    integer = isinstance(value, int)
    first = default_range(kind, field, value)  # never 0 to 0 for a step whose own value is 0
    low, high = current.get("min", first[0]), current.get("max", first[1])
    c = st.columns(2)
    cast = int if integer else float
    low = c[0].number_input(f"{field}: lowest", value=cast(low), key=f"{key}-min")
    high = c[1].number_input(f"{field}: highest", value=cast(high), key=f"{key}-max")
    return {"min": low, "max": high}


def _controls_editor(step_raw: dict[str, Any], parsed, key: str) -> dict[str, Any]:
    """Which fields students may change and within what; returns the step's "open" dict."""
    fields = openable_fields(parsed) if parsed is not None else {}
    current = dict(step_raw.get("open") or {})
    picked = st.multiselect("Controls students may change", list(fields),
                            default=[f for f in current if f in fields], key=f"{key}-open",
                            format_func=lambda f: f"{field_words(parsed.kind, f).label} ({f})",
                            help="Everything else stays as the lesson sets it; a link cannot change it")  # fmt: skip
    out = {}
    for field in picked:
        old = current.get(field) or {}
        with st.container(border=True):
            c = st.columns(2)
            words = field_words(parsed.kind, field)  # the field's own label and help, where the file gives none
            label = c[0].text_input(f"{field}: label", value=old.get("label", words.label),
                                    key=f"{key}-{field}-label")  # fmt: skip
            help_ = c[1].text_input(f"{field}: one line under it", value=old.get("help", words.help),
                                    key=f"{key}-{field}-help")  # fmt: skip
            entry: dict[str, Any] = control_words(parsed.kind, field, old, label, help_)
            mode = fields[field]
            if mode == "range":  # a number: a range, or a few values to choose from (a seed, a width)
                mode = st.radio(f"{field}: students pick", ("range", "choices"), horizontal=True,
                                index=1 if "choices" in old else 0, key=f"{key}-{field}-mode")  # fmt: skip
            if mode == "range":
                entry |= _range_inputs(parsed.kind, field, get_field(parsed.spec, field), old, f"{key}-{field}")
            else:  # the file's choices, else what the field's declaration offers that this step takes
                shown = choices_text(old.get("choices") or default_choices(parsed, field))
                text = st.text_input(f"{field}: choices, separated by commas", value=shown, key=f"{key}-{field}-ch",
                                     help="The step's own value must be one of them")  # fmt: skip
                try:
                    entry["choices"] = choice_values(text)
                except StitchError as exc:
                    ui.show_error(exc)
            out[field] = entry
    return out


def _alone(draft: dict[str, Any], step: dict[str, Any]):
    """``step`` parsed on its own (without ``beside``), or None when it does not parse."""
    try:
        return parse_lesson({**draft, "steps": [{k: v for k, v in step.items() if k != "beside"}]}).step(1)
    except LessonError:
        return None


def editor(lesson: Lesson) -> None:
    """The editor of ``lesson``: its title and summary, each step's title, text and open controls, steps moved
    or removed; Save (checked whole), Preview, the file, and the offline HTML."""
    key = _draft_key(lesson.name)
    draft: dict[str, Any] = st.session_state.setdefault(key, lesson.to_dict())
    version = st.session_state.setdefault(f"{key}-v", 0)  # bumped when steps move: widgets start again
    k = f"ed-{lesson.name}-{version}"
    st.subheader("Edit the lesson")
    st.caption("Write what the class reads at each step, choose what students may change, reorder. Save checks "
               "the whole lesson; start a step from any finished run with Results' Add to a lesson.")  # fmt: skip
    draft["title"] = st.text_input("Title", value=draft["title"], key=f"{k}-title")
    draft["summary"] = st.text_area("Summary (Markdown), shown on the first step", value=draft.get("summary", ""),
                                    key=f"{k}-summary")  # fmt: skip
    try:
        whole = parse_lesson(draft).steps
    except LessonError as exc:
        whole = None
        ui.show_error(exc)  # names the step and the field; Save refuses until it is mended
    for i, step in enumerate(draft["steps"]):
        parsed = whole[i] if whole is not None else _alone(draft, step)
        with st.expander(f"Step {i + 1}: {ui.plain(step.get('title', ''))} "
                         f"({ui.plain(step.get('kind') or step.get('preset'))})",
                         expanded=i == 0):  # fmt: skip
            step["title"] = st.text_input("Step title", value=step.get("title", ""), key=f"{k}-{i}-title")
            step["text"] = st.text_area("Text (Markdown; {{penalty}} names a number and says what it means)",
                                        value=step.get("text", ""), key=f"{k}-{i}-text", height=150)  # fmt: skip
            if parsed is not None:
                step["open"] = _controls_editor(step, parsed, f"{k}-{i}")
                if not step["open"]:
                    step.pop("open")
            c = st.columns(3)
            moved = None
            if c[0].button("Move up", key=f"{k}-{i}-up", disabled=i == 0, icon=":material/arrow_upward:"):
                moved = move_step(draft, i, -1)
            if c[1].button("Move down", key=f"{k}-{i}-down", disabled=i == len(draft["steps"]) - 1,
                           icon=":material/arrow_downward:"):  # fmt: skip
                moved = move_step(draft, i, 1)
            if c[2].button("Remove", key=f"{k}-{i}-remove", icon=":material/delete:"):
                moved = remove_step(draft, i)
            if moved is not None:
                st.session_state[key] = moved
                st.session_state[f"{key}-v"] = version + 1
                st.rerun()
    _editor_actions(lesson, draft, key)


def _editor_actions(lesson: Lesson, draft: dict[str, Any], key: str) -> None:
    c = st.columns(4)
    if (c[0].button("Save", type="primary", key="ed-save", icon=":material/save:", disabled=ui.viewer_mode())
            and not ui.viewer_mode() and not roles.refuse("edit")):  # fmt: skip
        try:
            saved = save_lesson(draft, ui.get_store())
        except StitchError as exc:
            ui.show_error(exc)
        else:
            st.session_state[key] = saved.to_dict()
            st.success(f"Saved {ui.quote(saved.name)} ({len(saved.steps)} steps) into the store."
                       + ("" if len(saved.steps) >= 3 else " A lesson usually has 3 to 10 steps."))  # fmt: skip
    if c[1].button("Preview as a student", key="ed-preview", icon=":material/visibility:",
                   help="Opens the saved lesson's first step as students see it (save first)"):  # fmt: skip
        st.query_params.from_dict({"lesson": lesson.name, "step": "1"})
        st.rerun()
    c[2].download_button("Download the lesson file", lesson_json(draft), file_name=f"{lesson.name}.json",
                         mime="application/json", key="ed-download", icon=":material/download:")  # fmt: skip
    states = ",".join(str(s) for s in lesson_progress(lesson, ui.get_store()))  # a step computed since: made anew
    held = hashlib.sha1(f"{lesson_json(lesson)}|{states}".encode()).hexdigest()[:12]
    ui.made_download(c[3], "Download HTML handout", lambda: lesson_report(lesson, ui.get_store()).encode(),
                     file_name=f"{lesson.name}.html", mime="text/html", key=f"ed-report-{lesson.name}-{held}",
                     icon=":material/description:",
                     help="The saved lesson's text and every computed step's result in one file that opens "
                          "without a server (steps not computed yet are named at its top)")  # fmt: skip
    if st.button("Discard changes", key="ed-discard"):
        st.session_state.pop(key, None)
        st.rerun()
