"""What a student asked for (a link's query values or the page's widgets), held inside what the step opens.

A value outside an open range is clamped to its end, one that is not among the choices falls back to the
lesson's own, a field the step does not open is ignored: each with a note the page shows, naming an open
control by its label (the one its widget shows).  Nothing the
lesson hides can be changed, so a link can never launch a hidden setting.

>>> from stitchcore.lessons.lesson import parse_lesson
>>> step = parse_lesson({"name": "demo", "title": "Demo", "steps": [{"title": "Stitch", "text": "",
...     "kind": "stitch", "spec": {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "cut_a": "block1",
...     "cut_b": "block1", "epochs": 2}, "open": {"epochs": {"min": 0, "max": 5}}}]}).step(1)
>>> v = student_values(step, {"epochs": "50", "lr": "9"})
>>> v.changed
{'epochs': 5}
>>> v.notes
('Adapter training epochs 50 is outside 0 to 5: using 5', 'lr is not open in this step: ignored')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from stitchcore.lessons.lesson import RESERVED, Control, Step, _spec_class, get_field, set_field
from stitchcore.params import Field, declared_field, hold

__all__ = ["StudentValues", "student_values"]


@dataclass(frozen=True)
class StudentValues:
    """The open controls' values, each allowed; ``changed``: those that differ from the lesson's own."""

    values: dict[str, Any]  # every open field -> its value (the lesson's own where none was asked for)
    changed: dict[str, Any]  # the fields that differ from the lesson's own
    notes: tuple[str, ...]  # what was clamped, replaced or ignored, in words

    def spec(self, step: Step) -> dict[str, Any]:
        """The step's spec dict with these values in it."""
        spec = step.spec
        for field, value in self.changed.items():
            spec = set_field(spec, field, value)
        return spec


def _field(step: Step, control: Control) -> Field:
    """The control's field as the kind declares it (:mod:`stitchcore.params`), narrowed to what the step opens;
    a field the kind does not declare is read as the control's own values."""
    if control.choices is not None:
        base = declared_field(step.kind, control.field) or Field(control.field, str)
        return base.narrowed(choices=control.choices)
    base = declared_field(step.kind, control.field) or Field(control.field, float)
    return replace(base, type=int if control.integer else float, low=control.low, high=control.high, choices=None,
                   none_as=None)  # fmt: skip


def _held(step: Step, control: Control, raw: Any, own: Any) -> tuple[Any, str | None]:
    """``raw`` as an allowed value of ``control`` and a note when it had to change (:func:`stitchcore.params.hold`,
    the page's and the links' own rule, inside the step's narrower range or choices)."""
    read = getattr(_spec_class(step.kind), "read_data", None)  # a plain folder as the step's choices read it
    raw = read(control.field, raw) if read is not None else raw
    held = hold(_field(step, control), raw, who=f"{control.label} ", own=own, offers="this step")
    return held.value, held.note


def student_values(step: Step, given: Mapping[str, Any]) -> StudentValues:
    """The values of ``step``'s open controls from ``given`` (strings from a link, or typed values), held inside
    the step's ranges and choices; the page's own parameters (lesson, step, view) are skipped."""
    values, changed, notes = {}, {}, []
    for control in step.open:
        own = get_field(step.spec, control.field)
        value = own
        if control.field in given:
            value, note = _held(step, control, given[control.field], own)
            if note:
                notes.append(note)
        values[control.field] = value
        if value != own:
            changed[control.field] = value
    for field in given:
        if field not in values and field not in RESERVED:
            notes.append(f"{field if len(field) <= 40 else field[:37] + '...'} is not open in this step: ignored")
    return StudentValues(values, changed, tuple(notes))
