"""Editing a lesson as its file's dict: a step from a stored run, steps moved or removed, the controls a step may open.

Every function returns a new dict (the one given is left as it was); :func:`~stitchcore.lessons.parse_lesson`
checks the result when it is saved.

>>> draft = new_lesson("my-lesson", "My lesson")
>>> draft = add_step(draft, {"title": "One", "text": "", "kind": "zoo", "spec": {"seed": 0}})
>>> draft = add_step(draft, {"title": "Two", "text": "", "kind": "zoo", "spec": {"seed": 1}})
>>> [s["title"] for s in move_step(draft, 1, -1)["steps"]], [s["title"] for s in draft["steps"]]
(['Two', 'One'], ['One', 'Two'])
"""

from __future__ import annotations

import copy
import json
from typing import Any

from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.lessons.lesson import FORMAT, MAX_STEPS, NAME, NAME_RULE, RESERVED, LessonError, Step
from stitchcore.store.results import RunRecord

__all__ = ["add_step", "choice_values", "move_step", "new_lesson", "openable_fields", "remove_step", "step_from_run"]


def new_lesson(name: str, title: str) -> dict[str, Any]:
    """An empty draft (a lesson needs a step before it saves)."""
    if not NAME.match(name):
        raise LessonError(f"{NAME_RULE}, not {name!r}")
    return {"format": FORMAT, "name": name, "title": title, "summary": "", "models": {}, "steps": []}


def step_from_run(rec: RunRecord) -> dict[str, Any]:
    """A step that shows the stored run ``rec``: its kind and every field of its spec written out (a stored dict
    leaves out fields at their LEGACY values, which a lesson would read as today's defaults: another run).

    The step's run id is ``rec.id``; its text is left for the teacher to write.
    """
    return {"title": rec.label or f"A {rec.kind} run", "text": "", "kind": rec.kind,
            "spec": spec_from_record(rec).all_fields()}


def add_step(data: dict[str, Any], step: dict[str, Any], at: int | None = None) -> dict[str, Any]:
    """``data`` with ``step`` inserted before index ``at`` (default: last); LessonError past :data:`MAX_STEPS`."""
    out = copy.deepcopy(data)
    if len(out["steps"]) >= MAX_STEPS:
        raise LessonError(f"lesson {out['name']!r} has {MAX_STEPS} steps already, the most a lesson holds; "
                          "start another lesson")  # fmt: skip
    out["steps"].insert(len(out["steps"]) if at is None else at, copy.deepcopy(step))
    return out


def move_step(data: dict[str, Any], index: int, offset: int) -> dict[str, Any]:
    """``data`` with step ``index`` (0-based) moved by ``offset`` places (held inside the list); a ``beside``
    that named a moved step follows it."""
    out = copy.deepcopy(data)
    steps = out["steps"]
    to = min(max(index + offset, 0), len(steps) - 1)
    order = list(range(len(steps)))
    order.insert(to, order.pop(index))
    out["steps"] = [steps[i] for i in order]
    new_number = {old + 1: new + 1 for new, old in enumerate(order)}
    for step in out["steps"]:
        if isinstance(step.get("beside"), int) and step["beside"] in new_number:
            step["beside"] = new_number[step["beside"]]
    return out


def remove_step(data: dict[str, Any], index: int) -> dict[str, Any]:
    """``data`` without step ``index`` (0-based); a ``beside`` that named it is dropped, later ones renumbered."""
    out = copy.deepcopy(data)
    del out["steps"][index]
    for step in out["steps"]:
        beside = step.get("beside")
        if isinstance(beside, int):
            if beside == index + 1:
                del step["beside"]
            elif beside > index + 1:
                step["beside"] = beside - 1
    return out


def openable_fields(step: Step) -> dict[str, str]:
    """The spec fields a step could open to students, each ``"range"`` (a number) or ``"choices"`` (anything
    else plain): top-level fields holding a number, a string or a bool."""
    out = {}
    for field, value in step.spec.items():
        if field in RESERVED:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[field] = "range"
        elif isinstance(value, (str, bool)):
            out[field] = "choices"
    return out


def choice_values(text: str) -> list[Any]:
    """Comma-separated choices as typed: each read as JSON where it is (numbers, true, null), else as text.

    >>> choice_values("block1, block2"), choice_values("0, 1.5, true")
    (['block1', 'block2'], [0, 1.5, True])
    """
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            value = json.loads(part)
        except json.JSONDecodeError:
            value = part
        out.append(value if isinstance(value, (int, float, str, bool)) or value is None else part)
    if not out:
        raise StitchError("give the choices separated by commas, e.g. block1, block2")
    return out
