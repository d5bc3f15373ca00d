"""Editing a lesson as its file's dict: a step from a stored run, steps moved or removed, the controls a step may open.

Every function returns a new dict (the one given is left as it was); :func:`~stitchcore.lessons.parse_lesson`
checks the result when it is saved.  A run added to a lesson (:func:`add_run`) is titled so that steps of one
kind differing in a field or two say which (``... (epochs 0)``, ``... (epochs 3)``); a number control first
offers :func:`default_range`.

>>> draft = new_lesson("my-lesson", "My lesson")
>>> draft = add_step(draft, {"title": "One", "text": "", "kind": "zoo", "spec": {"seed": 0}})
>>> draft = add_step(draft, {"title": "Two", "text": "", "kind": "zoo", "spec": {"seed": 1}})
>>> [s["title"] for s in move_step(draft, 1, -1)["steps"]], [s["title"] for s in draft["steps"]]
(['Two', 'One'], ['One', 'Two'])
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

from stitchcore.errors import StitchError
from stitchcore.experiments import get_experiment, new_spec, spec_from_record
from stitchcore.experiments.field_words import field_words
from stitchcore.lessons.lesson import (
    FORMAT,
    MAX_STEPS,
    MAX_TITLE,
    NAME,
    NAME_RULE,
    RESERVED,
    LessonError,
    Step,
    get_field,
    set_field,
)
from stitchcore.params import Field, declared, declared_field, defaults
from stitchcore.store.results import RunRecord

__all__ = ["add_run", "add_step", "choice_values", "choices_text", "control_words", "default_choices", "default_range",
           "move_step", "new_lesson", "openable_fields", "remove_step", "step_from_run"]

MOST_DIFFERING = 2  # steps of one kind differing in more fields than this keep their titles (the teacher writes them)


def new_lesson(name: str, title: str) -> dict[str, Any]:
    """An empty draft (a lesson needs a step before it saves)."""
    if not NAME.match(name):
        raise LessonError(f"{NAME_RULE}, not {name!r}")
    return {"format": FORMAT, "name": name, "title": title, "summary": "", "models": {}, "steps": []}


def step_from_run(rec: RunRecord) -> dict[str, Any]:
    """A step that shows the stored run ``rec``: its kind and every field of its spec written out (a stored dict
    leaves out fields at their LEGACY values, which a lesson would read as today's defaults: another run).

    The step's run id is ``rec.id``; its text is left for the teacher to write.  Its title is the run's label,
    on one line and cut to :data:`~stitchcore.lessons.lesson.MAX_TITLE` characters (a lesson's titles are short).
    """
    return {"title": _short(rec.label or f"A {rec.kind} run"), "text": "", "kind": rec.kind,
            "spec": spec_from_record(rec).all_fields()}


def _short(title: str) -> str:
    """``title`` on one line (control characters as spaces) and at most :data:`MAX_TITLE` characters.

    >>> _short("a\\nb"), len(_short("x" * 1000))
    ('a b', 200)
    """
    title = "".join(" " if ord(ch) < 32 or 127 <= ord(ch) < 160 else ch for ch in title)
    return title if len(title) <= MAX_TITLE else title[: MAX_TITLE - 3] + "..."


def add_run(data: dict[str, Any], rec: RunRecord, at: int | None = None) -> dict[str, Any]:
    """``data`` with a step showing the stored run ``rec`` (:func:`step_from_run`) inserted before index ``at``
    (default: last).  Where steps of its kind carry the same default title and their specs differ from its in
    at most :data:`MOST_DIFFERING` fields, the title says those fields' values, the new step's and theirs
    (a step whose title the teacher changed keeps it).

    >>> from stitchcore.store.results import RunRecord
    >>> def run(epochs): return RunRecord("0" * 16, "stitch", {"a": "zoo:x", "b": "zoo:y", "cut_a": "block2",
    ...     "cut_b": "block2", "epochs": epochs}, "done", {}, None, 0.0, None, None, "A[block2] -> B[block2]")
    >>> draft = add_run(add_run(new_lesson("demo", "Demo"), run(0)), run(3))
    >>> [s["title"] for s in draft["steps"]]
    ['A[block2] -> B[block2] (epochs 0)', 'A[block2] -> B[block2] (epochs 3)']
    """
    step = step_from_run(rec)
    base = step["title"]
    out = add_step(data, step, at)
    index = len(out["steps"]) - 1 if at is None else at
    siblings = [i for i, s in enumerate(out["steps"]) if i != index and s.get("kind") == step["kind"]
                and isinstance(s.get("title"), str) and (s["title"] == base or s["title"].startswith(base + " ("))]
    differing: list[str] = []
    for i in siblings:
        fields = _differing(step["spec"], out["steps"][i].get("spec") or {})
        if 0 < len(fields) <= MOST_DIFFERING:
            differing += [f for f in fields if f not in differing]
    if not differing:
        return out
    out["steps"][index]["title"] = _titled(base, step["spec"], differing)
    for i in siblings:
        if out["steps"][i]["title"] == base:  # still the default title: say its values too
            out["steps"][i]["title"] = _titled(base, out["steps"][i].get("spec") or {}, differing)
    return out


def _flat(spec: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A spec dict with its nested dicts' fields dotted (``adapter.init``)."""
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if isinstance(value, Mapping) and value:
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def _differing(one: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """The (dotted) fields whose values differ between two spec dicts, in ``one``'s order, then ``other``'s."""
    a, b = _flat(one), _flat(other)
    return [f for f in dict.fromkeys([*a, *b]) if a.get(f, _MISSING) != b.get(f, _MISSING)]


_MISSING = object()


def _shown(value: Any) -> str:
    """A spec value in a title: text as it is, numbers plainly, anything else as JSON (``true``, ``[3, 8]``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return f"{value:g}"
    return json.dumps(value)


def _titled(base: str, spec: Mapping[str, Any], fields: list[str]) -> str:
    flat = _flat(spec)
    said = _short(f" ({', '.join(f'{f} {_shown(flat.get(f))}' for f in fields)})")
    if len(base) + len(said) > MAX_TITLE and len(said) <= MAX_TITLE // 2:  # the values kept: they tell steps apart
        base = base[: MAX_TITLE - len(said) - 3] + "..."
    return _short(base + said)


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
    """The spec fields a step could open to students, each ``"range"`` (a number) or ``"choices"``.

    Where the step's kind declares a field (:func:`stitchcore.params.declared_field`) the declaration decides: a
    number without declared choices is a range (choices where the step leaves it empty: ``max_train`` None),
    anything else one value is choices, a list (a sweep's cuts) is not openable; a nested declared field
    (``adapter.init``) is openable too.  A field the kind does not declare is guessed from its value: top-level
    fields holding a number (a range), a string or a bool (choices).

    >>> from stitchcore.lessons.lesson import parse_lesson
    >>> step = parse_lesson({"name": "demo", "title": "Demo", "steps": [{"title": "Stitch", "text": "",
    ...     "kind": "stitch", "spec": {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "cut_a": "block1",
    ...     "cut_b": "block1"}}]}).step(1)
    >>> fields = openable_fields(step)
    >>> fields["epochs"], fields["adapter.init"], fields["max_train"], "data_id" in fields
    ('range', 'choices', 'choices', False)
    """
    out = {}
    for name, value in step.spec.items():
        if name in RESERVED:
            continue
        if isinstance(value, Mapping):  # a nested spec (the adapter): the fields its kind declares inside it
            for field in declared(step.kind):
                if field.name.partition(".")[0] == name and "." in field.name:
                    mode = _declared_mode(field, _nested(step.spec, field.name))
                    if mode is not None:
                        out[field.name] = mode
            continue
        field = declared_field(step.kind, name)
        mode = _declared_mode(field, value) if field is not None else _guessed_mode(value)
        if mode is not None:
            out[name] = mode
    return out


_LISTS = (list, tuple, dict)


def _nested(spec: Mapping[str, Any], name: str) -> Any:
    value: Any = spec
    for part in name.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _declared_mode(field: Field, value: Any) -> str | None:
    """``range`` or ``choices`` for a declared field whose step value is ``value`` (None: not openable)."""
    if field.type in _LISTS or isinstance(value, _LISTS):
        return None
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if field.type in (int, float) and field.choices is None and is_number:
        return "range"
    return "choices"


def _guessed_mode(value: Any) -> str | None:
    """Today's guess for a field no declaration names: a number is a range, a string or a bool choices."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "range"
    if isinstance(value, (str, bool)):
        return "choices"
    return None


def default_choices(step: Step, field: str) -> list[Any]:
    """The values the editor first offers for a choices control of ``field``: the step's own value, and where
    the step's kind declares the field, the other values its declaration offers (its choices, its suggestions,
    true and false) that make a spec with the step's other fields (an lstsq start is not offered for a
    convolutional adapter); else the step's own value alone (the teacher types the rest).

    >>> from stitchcore.lessons.lesson import parse_lesson
    >>> step = parse_lesson({"name": "demo", "title": "Demo", "steps": [{"title": "Stitch", "text": "",
    ...     "kind": "stitch", "spec": {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "cut_a": "block1",
    ...     "cut_b": "block1", "adapter": {"kind": "conv3x3_relu", "init": "random"}}}]}).step(1)
    >>> default_choices(step, "adapter.init"), default_choices(step, "noise_control")
    (['random', 'identity'], [True, False])
    """
    own = get_field(step.spec, field)
    declared_ = declared_field(step.kind, field)
    if declared_ is None:
        return [own]
    offered = [True, False] if declared_.type is bool else list(declared_.choices or declared_.suggestions)
    out = [own]
    for value in offered:
        if value in out:
            continue
        try:
            new_spec(step.kind, set_field(step.spec, field, value))
        except (StitchError, TypeError, ValueError):  # a value this step's other fields do not take
            continue
        out.append(value)
    return sorted(out, key=lambda v: offered.index(v) if v in offered else -1)


def _spec_default(kind: str, field: str) -> Any:
    """Today's default of a spec field: a declared one's (nested ones too: ``adapter.rank``), else the spec
    class's top-level field (None for a required field, or a kind without a Spec class)."""
    if declared_field(kind, field) is not None:
        return defaults(kind).get(field)
    cls = getattr(get_experiment(kind).from_dict, "__self__", None)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return None
    for f in dataclasses.fields(cls):
        if f.name == field:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    return None


def default_range(kind: str, field: str, value: float) -> tuple[float, float]:
    """The range the editor first offers for a number ``field`` of a ``kind`` step whose own value is ``value``:

    * above 0: 0 to twice the value (at least the value + 1 for a whole number, + 0.1 otherwise);
    * below 0: twice the value to 0;
    * 0 (a closed-form start's 0 epochs, seed 0): 0 to the field's default where that is above 0, at least 10
      for a whole number; else 0 to 10 for a whole number, 0 to 1 otherwise;

    held inside the range the kind declares for the field (what its form offers: a learning rate from 1e-05,
    at most 500 epochs) where the step's own value lies in it.

    >>> default_range("stitch", "epochs", 5), default_range("stitch", "epochs", 0)
    ((0, 10), (0, 10))
    >>> default_range("stitch", "epochs", 400), default_range("stitch", "epochs", 900)  # the form: 0 to 500
    ((0, 500), (0, 1800))
    >>> default_range("lmstitch", "steps", 0), default_range("stitch", "lr", 0.01)
    ((0, 2000), (1e-05, 0.11))
    """
    low, high = _guessed_range(kind, field, value)
    declared_ = declared_field(kind, field)
    if declared_ is None or declared_.choices is not None:
        return low, high
    d_low = -math.inf if declared_.low is None else declared_.low
    d_high = math.inf if declared_.high is None else declared_.high
    if not d_low <= value <= d_high:  # the step is beyond what a form offers: the declaration does not bound it
        return low, high
    held = max(low, d_low), min(high, d_high)
    return held if held[0] < held[1] else (low, high)


def _guessed_range(kind: str, field: str, value: float) -> tuple[float, float]:
    whole = isinstance(value, int) and not isinstance(value, bool)
    if value > 0:
        return 0, max(value * 2, value + (1 if whole else 0.1))
    if value < 0:
        return value * 2, 0
    default = _spec_default(kind, field)
    if isinstance(default, (int, float)) and not isinstance(default, bool) and default > 0:
        return 0, (max(int(default), 10) if whole else default)
    return 0, (10 if whole else 1.0)


def control_words(kind: str, field: str, old: Mapping[str, Any], label: str, help_: str) -> dict[str, str]:
    """The ``label`` and ``help`` keys a control's entry keeps from what the editor shows (the file's own, else
    the field's, :func:`~stitchcore.experiments.field_words.field_words`): each one the file gave, or that
    differs from the field's; the field's own are left out, so a lesson the editor did not change saves as it was.

    >>> control_words("stitch", "epochs", {}, "Adapter training epochs", "")
    {}
    >>> control_words("stitch", "epochs", {"label": "Epochs"}, "Epochs", "0: the fit alone")
    {'label': 'Epochs', 'help': '0: the fit alone'}
    """
    words = field_words(kind, field)
    out = {}
    if label and ("label" in old or label != words.label):
        out["label"] = label
    if help_ and ("help" in old or help_ != words.help):
        out["help"] = help_
    return out


def choices_text(values: list[Any]) -> str:
    """Choices as the editor's text box shows them, read back by :func:`choice_values`: text as it is, anything
    else as JSON (``true``, ``null``, ``0.5``).

    >>> choices_text([True, False, None, "block1", 0.5])
    'true, false, null, block1, 0.5'
    >>> choice_values(choices_text([True, None, "lstsq", 3]))
    [True, None, 'lstsq', 3]
    """
    return ", ".join(v if isinstance(v, str) else json.dumps(v) for v in values)


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
        except (ValueError, RecursionError):  # not JSON (or a number past Python's digits, brackets past reason)
            value = part
        out.append(value if isinstance(value, (int, float, str, bool)) or value is None else part)
    if not out:
        raise StitchError("give the choices separated by commas, e.g. block1, block2")
    return out
