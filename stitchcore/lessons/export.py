"""A lesson as one offline HTML file (the runs' report, each after its step's text, its ``{{name}}`` numbers
filled in from the run): for students without a server.

>>> from stitchcore.lessons import get_lesson
>>> from stitchcore.store.results import Store
>>> import tempfile
>>> lesson_report(get_lesson("two-seeds"), Store(tempfile.mkdtemp()))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
stitchcore.lessons.lesson.LessonError: no step of lesson 'two-seeds' is computed in this store yet: ...
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stitchcore.lessons.lesson import Lesson, LessonError, Step
from stitchcore.lessons.numbers import run_numbers
from stitchcore.lessons.plan import step_run
from stitchcore.measures.meaning import explain
from stitchcore.report.html import Chapter, ReportInfo, report_html, write_report
from stitchcore.store.results import Store

__all__ = ["lesson_report", "step_words", "write_lesson_report"]


def step_words(step: Step, numbers: Mapping[str, str] | None = None) -> str:
    """A step's Markdown with each ``{{name}}`` as that number's name and, from ``numbers`` (its computed run's:
    :func:`~stitchcore.lessons.numbers.run_numbers`), its value; what each means after it."""
    return "\n\n".join([step.markdown(numbers), *(f"*{explain(name)}*" for name in step.meanings)])


def lesson_report(lesson: Lesson, store: Store) -> str:
    """The lesson's summary, then each computed step (its own settings) with its text and its run's report;
    the steps not computed yet are named at the top.  LessonError when none is computed."""
    run_ids, kw = _handout(lesson, store)
    return report_html(store, run_ids, **kw)


def write_lesson_report(lesson: Lesson, store: Store, out: str | Path) -> ReportInfo:
    """:func:`lesson_report` written to ``out`` as ``runs report`` writes (atomically; StoreError for a folder)."""
    run_ids, kw = _handout(lesson, store)
    return write_report(store, run_ids, out, **kw)


def _handout(lesson: Lesson, store: Store) -> tuple[list[str], dict[str, Any]]:
    """The runs of the lesson's computed steps and the report's title, intro and one chapter per run."""
    run_ids: list[str] = []
    chapters: list[Chapter] = []
    missing = []
    for step in lesson.steps:
        rec = store.lookup(step_run(step).run_id)
        if rec is None or rec.status != "done":
            missing.append(step.number)
            continue
        heading = f"Step {step.number}. {step.title}"
        words = step_words(step, run_numbers(rec))
        if rec.id in run_ids:  # two steps showing one run: one section, both texts
            k = run_ids.index(rec.id)
            chapters[k] = Chapter(f"{chapters[k].heading} / {heading}", f"{chapters[k].text}\n\n{words}")
            continue
        run_ids.append(rec.id)
        chapters.append(Chapter(heading, words))
    if not run_ids:
        raise LessonError(f"no step of lesson {lesson.name!r} is computed in this store yet: compute it first "
                          f"(the presenter's Compute all steps, or `python -m stitchcore lessons run {lesson.name}`)")
    intro = lesson.summary
    if missing:
        intro += f"\n\n*Not computed when this file was made, so not in it: step(s) {', '.join(map(str, missing))}.*"
    return run_ids, {"title": lesson.title, "intro": intro, "chapters": chapters}
