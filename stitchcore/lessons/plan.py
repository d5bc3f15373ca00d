"""What a lesson step runs: the zoo models it uses (queued first, cached), then its own run.

A step's run id is the hash of its spec dict like any run's, so thirty students opening the same step find
one stored (or queued) run, not thirty; a student's changed controls are another spec, so another run.

>>> from stitchcore.lessons.lesson import parse_lesson
>>> lesson = parse_lesson({"name": "demo", "title": "Demo", "models": {"A": {"seed": 0}, "B": {"seed": 1}},
...     "steps": [{"title": "Stitch", "text": "", "kind": "stitch", "spec": {"a": "@A", "b": "@B",
...     "cut_a": "block1", "cut_b": "block1", "epochs": 2}, "open": {"epochs": {"min": 0, "max": 5}}}]})
>>> run = step_run(lesson.step(1))
>>> [kind for kind, _ in run.plan()], run.spec.a
(['zoo', 'zoo', 'stitch'], 'zoo:cnn-digits-s0')
>>> step_run(lesson.step(1), {"epochs": 3}).run_id != run.run_id
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from stitchcore.errors import Cancelled, RunBusy, StitchError
from stitchcore.experiments import RunOutcome, get_experiment, new_spec, run_experiment
from stitchcore.experiments.trait_presets import zoo_ref
from stitchcore.experiments.zoo_recipe import ZooRecipe
from stitchcore.lessons.lesson import Lesson, LessonError, Step, one_line
from stitchcore.lessons.values import student_values
from stitchcore.models.refs import parse_ref
from stitchcore.models.sources.zoo import find_zoo_run
from stitchcore.store.results import Store, run_id_for

__all__ = ["StepRun", "lesson_progress", "missing_models", "run_lesson", "step_run"]


@dataclass(frozen=True)
class StepRun:
    """One step's run with given control values: its kind, spec object and the lesson models it needs."""

    step: Step
    kind: str
    spec: Any  # the kind's spec object
    models: tuple[ZooRecipe, ...]  # queued first (a model already in the store comes back cached)
    notes: tuple[str, ...]  # what the student's values became (clamped, ignored ...)
    changed: dict[str, Any]  # the open fields that differ from the lesson's own

    @property
    def run_id(self) -> str:
        return run_id_for(self.kind, self.spec.to_dict())

    @property
    def is_lessons_own(self) -> bool:
        """True for the step's own settings, False for a student's variant."""
        return not self.changed

    def plan(self) -> list[tuple[str, Any]]:
        """``[(kind, spec)]`` in the order a job queue runs them: the models, then the step's run."""
        return [*(("zoo", r) for r in self.models), (self.kind, self.spec)]


def step_run(step: Step, given: Mapping[str, Any] | None = None) -> StepRun:
    """The run of ``step`` with a student's ``given`` values (held inside the open ranges; see
    :func:`~stitchcore.lessons.values.student_values`); None or {} gives the lesson's own run."""
    values = student_values(step, given or {})
    cls = getattr(get_experiment(step.kind).from_dict, "__self__", None)  # the spec class of a Spec kind
    data_fields = set(getattr(cls, "DATA_FIELDS", ()))  # the fields naming data it reads (experiments._data_id)
    try:
        if data_fields & set(values.changed):  # a student's other data: a spec made now, for those files
            spec = new_spec(step.kind, {k: v for k, v in values.spec(step).items() if k != "data_id"})
        else:
            spec = get_experiment(step.kind).from_dict(values.spec(step))
    except StitchError as exc:  # parse_lesson built every allowed value once; a combination may still refuse
        raise LessonError(f"step {step.number} ({step.title!r}): these values do not run together: {exc}") from exc
    return StepRun(step, step.kind, spec, step.models, values.notes, values.changed)


def _model_fields(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """``(field, ref)`` for every top-level field of a spec dict that holds a zoo model ref."""
    out = []
    for field, value in spec.items():
        for ref in value if isinstance(value, list) else [value]:
            if isinstance(ref, str) and ref.startswith("zoo:"):
                out.append((field, ref))
    return out


def missing_models(lesson: Lesson, store: Store) -> list[str]:
    """One message per step field naming a zoo model that neither the store holds nor the lesson trains
    ([] when every step can run here)."""
    made = {zoo_ref(r) for step in lesson.steps for r in step.models} | {zoo_ref(r) for r in lesson.models.values()}
    problems = []
    for step in lesson.steps:
        for field, ref in _model_fields(step.spec):
            try:
                name = parse_ref(ref).name
                if f"zoo:{name}" in made:
                    continue
                find_zoo_run(store, name)
            except StitchError as exc:
                problems.append(one_line(f"lesson {lesson.name!r}, step {step.number} ({step.title!r}), field "
                                         f"{field!r}: {exc}"))  # fmt: skip
    return problems


def lesson_progress(lesson: Lesson, store: Store) -> list[str | None]:
    """Each step's own run as the store holds it: "done", "running", "queued", "failed" ... or None (never run)."""
    out = []
    for step in lesson.steps:
        rec = store.lookup(step_run(step).run_id)
        out.append(rec.status if rec is not None else None)
    return out


def run_lesson(lesson: Lesson, store: Store, *, steps: list[int] | None = None,
               on_step: Callable[[Step], None] | None = None, **run_kw: Any) -> list[RunOutcome]:
    """Run ``steps`` (numbers; default all) of the lesson with its own settings, in order, here and now (cached
    runs come back at once); returns each step's outcome.  ``on_step(step)`` is called as each begins;
    ``run_kw`` go to every ``run_experiment`` (progress, device, cancel ...).  The CLI's ``lessons run``
    (a teacher computing a lesson before class) and the tests use it."""
    numbers = list(steps) if steps else list(range(1, len(lesson.steps) + 1))
    for number in numbers:  # every number checked before anything runs
        if isinstance(number, bool) or not isinstance(number, int):
            raise LessonError(f"lesson {lesson.name!r}: steps are numbered 1 to {len(lesson.steps)}, not {number!r}")
        lesson.step(number)
    if problems := missing_models(lesson, store):
        raise LessonError(problems[0])
    outcomes = []
    for number in numbers:
        run = step_run(lesson.step(number))
        if on_step is not None:
            on_step(run.step)
        for kind, spec in run.plan():
            try:
                outcome = run_experiment(kind, spec, store, **run_kw)
            except StitchError as exc:
                if isinstance(exc, (LessonError, Cancelled, RunBusy)):  # said as they are (the CLI's exit codes)
                    raise
                raise LessonError(f"lesson {lesson.name!r}, step {number} ({run.step.title!r}): {exc}") from exc
        outcomes.append(outcome)
    return outcomes
