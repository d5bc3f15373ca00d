"""A lesson: a short sequence of runs the project knows, each with its text and the controls students may change.

A lesson file is JSON (``json.loads``: nothing in it runs)::

    {"format": 1, "name": "two-seeds", "title": "Stitching works between two seeds",
     "summary": "Markdown: what the class will see",
     "models": {"A": {"arch": "cnn", "seed": 0}},        # zoo recipes, trained (or found in the store) first
     "steps": [
       {"title": "...", "text": "Markdown: what to look at, a question to the class",
        "kind": "stitch", "spec": {"a": "@A", ...},       # a registered run kind and its spec; "@A" is model A
        # or "preset": "inheritance", "sweep": 1         (a Traits preset's sweep, with the models it trains)
        "open": {"cut_a": {"choices": ["block1", "block2"]}, "epochs": {"min": 0, "max": 10}},
        "beside": 1}                                      # (a matrix step) draw step 1's similarity run beside it
     ]}

A step's text may name a number's meaning, ``{{penalty}}`` (``measures.meaning``'s names): the page shows
it as the number's name with the computed run's value, ``**Stitching penalty (+1.1 pts [−0.2 to +2.7 pts])**``
(:func:`~stitchcore.lessons.numbers.step_numbers`; the name alone before the step is computed), and says
under the text what it means (direction, range, what chance is).  A control the file gives no ``label`` or
``help`` takes its field's (:func:`~stitchcore.experiments.field_words.field_words`).

Spec fields a step leaves out take today's defaults (``experiments.new_spec``), never a stored run's LEGACY
ones.  Steps are numbered from 1, as in links (``lessons?lesson=NAME&step=K``).  Every error is a
:class:`LessonError` naming the step and the field.

>>> lesson = parse_lesson({"name": "demo", "title": "Demo", "summary": "", "models": {"A": {"seed": 0}},
...     "steps": [{"title": "Train A", "text": "", "kind": "zoo", "spec": {"seed": 0}},
...               {"title": "Stitch", "text": "", "kind": "stitch",
...                "spec": {"a": "@A", "b": "@A", "cut_a": "block1", "cut_b": "block1", "epochs": 2},
...                "open": {"epochs": {"min": 0, "max": 5}}}]})
>>> lesson.steps[1].spec["a"], lesson.steps[1].open[0].high
('zoo:cnn-digits-s0', 5)
>>> parse_lesson({**lesson.to_dict(), "steps": [{"title": "Bad", "text": "", "kind": "stich", "spec": {}}]})
Traceback (most recent call last):
...
stitchcore.lessons.lesson.LessonError: lesson 'demo', step 1 ('Bad'), field 'kind': unknown experiment kind \
'stich'; did you mean 'stitch' or 'lmstitch'? (known: ...)
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stitchcore.errors import StitchError, shown
from stitchcore.experiments import get_experiment, new_spec
from stitchcore.experiments.field_words import field_words
from stitchcore.experiments.trait_presets import get_preset, zoo_ref
from stitchcore.experiments.zoo_recipe import ZooRecipe
from stitchcore.lessons.checks import MAX_NUMBER, json_problem, text_problem, type_problem
from stitchcore.measures.meaning import list_meanings, meaning

__all__ = [
    "FORMAT",
    "MAX_CHOICES",
    "MAX_HELP",
    "MAX_MODELS",
    "MAX_STEPS",
    "MAX_TITLE",
    "MEANING",
    "NAME_RULE",
    "RESERVED",
    "Control",
    "Lesson",
    "LessonError",
    "Step",
    "get_field",
    "one_line",
    "parse_lesson",
    "set_field",
]

FORMAT = 1  # the file format this code reads and writes
MAX_STEPS = 10  # a lesson is short: one class period (shipped lessons have 3-10 steps)
MAX_TITLE = 200  # characters in a title or a control's label: one line on the page (shipped: 43 at most)
MAX_HELP = 500  # characters in a control's help line (shipped: 98 at most)
MAX_MODELS = 20  # models a lesson trains (shipped: 2 at most); each is trained before the steps that use it
MAX_CHOICES = 50  # values a choices control offers, each checked as a run when the lesson is read (shipped: 3)
MAX_MESSAGE = 600  # characters in one message: a value it quotes is cut, never printed whole
RESERVED = ("lesson", "step", "view")  # the page's own query parameters: no control may be called that
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,47}$")  # a lesson's name: its file name and its link
NAME_RULE = "a lesson's name is lower-case letters, digits and '-' (its link and file name)"
ALIAS = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")  # a model's name inside the lesson ("@A")
MEANING = re.compile(r"\{\{\s*([A-Za-z0-9_:-]+)\s*\}\}")  # "{{penalty}}" in a step's text: what that number means
LESSON_KEYS = {"format", "name", "title", "summary", "models", "steps"}
STEP_KEYS = {"title", "text", "kind", "spec", "preset", "sweep", "open", "beside"}
CONTROL_KEYS = {"choices", "min", "max", "label", "help"}


class LessonError(StitchError):
    """A lesson file that cannot run: the message names the lesson, the step and the field."""


@dataclass(frozen=True)
class Control:
    """A spec field students may change: to one of ``choices``, or within ``low .. high``."""

    field: str  # a spec field; dotted for a nested one ("adapter.init")
    label: str  # the widget's label (default: the field's, experiments.field_words: "Adapter training epochs")
    help: str  # one line under the widget (default: the field's; "" = none)
    choices: tuple[Any, ...] | None = None  # the values allowed (None: a range)
    low: float | None = None  # a range's ends, inclusive
    high: float | None = None
    integer: bool = False  # whole numbers only (the lesson's own value is an int)

    def describe(self) -> str:
        """The values allowed, in words: ``0 to 10`` or ``block1, block2``."""
        if self.choices is not None:
            return ", ".join(map(str, self.choices))
        return f"{_num(self.low)} to {_num(self.high)}"


@dataclass(frozen=True)
class Step:
    """One step: a run of a registered kind with fixed settings, its text and its open controls."""

    number: int  # 1-based, as in links
    title: str
    text: str  # Markdown
    kind: str  # a registered run kind
    spec: dict[str, Any]  # every field of its spec ("@A" resolved, LEGACY values written out); from_dict reads it
    models: tuple[ZooRecipe, ...]  # the zoo models it uses that the lesson trains (queued before it, cached)
    open: tuple[Control, ...]  # what students may change
    beside: int | None  # a matrix step: the number of the similarity step drawn beside it
    source: dict[str, Any]  # the step as written (what the file keeps)
    meanings: tuple[str, ...] = ()  # the numbers its text explains ("{{penalty}}": measures.meaning's names)

    def control(self, field: str) -> Control | None:
        return next((c for c in self.open if c.field == field), None)

    def markdown(self, numbers: Mapping[str, str] | None = None) -> str:
        """The step's text with each ``{{name}}`` shown in bold as that number's name and, where ``numbers``
        (:func:`~stitchcore.lessons.numbers.step_numbers` of the step's computed run) has it, its value: the
        name alone before the run is computed.  The page and the handout say what it means under the text.

        >>> step = parse_lesson({"name": "d", "title": "D", "steps": [{"title": "S", "kind": "zoo", "spec": {},
        ...     "text": "The {{penalty}} here."}]}).step(1)
        >>> step.markdown(), step.markdown({"penalty": "+1.1 pts"})
        ('The **Stitching penalty** here.', 'The **Stitching penalty (+1.1 pts)** here.')
        """
        def shown(m: re.Match[str]) -> str:
            name = m.group(1)
            value = (numbers or {}).get(name)
            return f"**{meaning(name).title}" + (f" ({value})**" if value else "**")

        return MEANING.sub(shown, self.text)


@dataclass(frozen=True)
class Lesson:
    """A parsed lesson: every step checked against its kind's spec."""

    name: str
    title: str
    summary: str  # Markdown
    models: dict[str, ZooRecipe]  # "A" -> its recipe
    steps: tuple[Step, ...]
    source: dict[str, Any]  # the lesson as written

    def step(self, number: int) -> Step:
        """Step ``number`` (1-based); LessonError naming the range otherwise."""
        if not 1 <= number <= len(self.steps):
            raise LessonError(f"lesson {self.name!r} has steps 1 to {len(self.steps)}, not {number}")
        return self.steps[number - 1]

    def to_dict(self) -> dict[str, Any]:
        """The lesson as its file holds it (the steps as written, "@A" unresolved)."""
        return {"format": FORMAT, "name": self.name, "title": self.title, "summary": self.summary,
                "models": {k: dict(v) for k, v in self.source.get("models", {}).items()},
                "steps": [dict(s.source) for s in self.steps]}  # fmt: skip


def _num(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"


def get_field(spec: dict[str, Any], path: str) -> Any:
    """The value at ``path`` ("epochs", "adapter.init") of a spec dict; KeyError when there is none.

    >>> get_field({"adapter": {"init": "lstsq"}}, "adapter.init")
    'lstsq'
    """
    value: Any = spec
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(path)
        value = value[part]
    return value


def set_field(spec: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``spec`` with ``path`` set to ``value`` (nested dicts copied, the original untouched).

    >>> set_field({"adapter": {"init": "lstsq", "kind": "linear"}}, "adapter.init", "random")
    {'adapter': {'init': 'random', 'kind': 'linear'}}
    """
    head, _, rest = path.partition(".")
    out = dict(spec)
    out[head] = set_field(dict(spec.get(head) or {}), rest, value) if rest else value
    return out


class _Where:
    """Where in the lesson a message is about: ``lesson 'x', step 2 ('Title'), field 'epochs'``."""

    def __init__(self, lesson: str, step: int | None = None, title: str = "") -> None:
        self.lesson, self.step, self.title = lesson, step, title

    def error(self, message: str, field: str | None = None) -> LessonError:
        where = f"lesson {shown(self.lesson, 50)}"
        if self.step is not None:
            where += f", step {self.step}" + (f" ({shown(self.title, 50)})" if self.title else "")
        if field is not None:
            where += f", field {shown(field, 60)}"
        return LessonError(one_line(f"{where}: {message}"))


def one_line(message: str) -> str:
    """``message`` on one line and at most :data:`MAX_MESSAGE` characters (its start and its end, which names
    the fix, kept).

    >>> one_line("a\\nb"), len(one_line("x" * 10_000))
    ('a b', 600)
    """
    message = " ".join(message.splitlines())
    if len(message) <= MAX_MESSAGE:
        return message
    return message[: MAX_MESSAGE - 203] + " ... " + message[-198:]


def _text(d: dict, key: str, where: _Where, *, required: bool = True, most: int | None = MAX_TITLE,
          field: str | None = None) -> str:  # fmt: skip
    """``d[key]``, a string: one line of at most ``most`` characters (``most=None``: Markdown, any length the
    file holds, line breaks allowed); LessonError naming ``field`` (default: ``key``) otherwise."""
    field = field or key
    value = d.get(key)
    if value is None:
        if not required:
            return ""
        raise where.error("missing; give it a string", field)
    if not isinstance(value, str):
        raise where.error(f"must be a string, not {type(value).__name__}", field)
    if most is not None and len(value) > most:
        raise where.error(f"is {len(value):,} characters; at most {most}: shorten it", field)
    if (problem := text_problem(value, multiline=most is None)) is not None:
        raise where.error(problem, field)
    return value


def _unknown(d: dict, known: set[str], where: _Where, field: str | None = None) -> None:
    extra = sorted(set(d) - known)
    if extra:
        said = "[" + ", ".join(shown(k) for k in extra[:5]) + (", ..." if len(extra) > 5 else "") + "]"
        raise where.error(f"unknown key(s) {said}; known: {sorted(known)}", field)


def _resolve(value: Any, refs: dict[str, str], where: _Where, field: str) -> Any:
    """``value`` with every ``"@A"`` (or ``"@A?init=random"``) replaced by model A's zoo ref."""
    if isinstance(value, str) and value.startswith("@"):
        alias, q, query = value[1:].partition("?")
        if alias not in refs:
            known = ", ".join("@" + a for a in refs) or "none: add a \"models\" entry"
            raise where.error(f"{value!r} names no model of the lesson (its models: {known})", field)
        return refs[alias] + (q + query if q else "")
    if isinstance(value, list):
        return [_resolve(v, refs, where, field) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, refs, where, f"{field}.{k}") for k, v in value.items()}
    return value


def _spec_class(kind: str) -> type | None:
    """The spec dataclass of a registered ``kind`` (None for a kind registered without one)."""
    cls = getattr(get_experiment(kind).from_dict, "__self__", None)
    return cls if isinstance(cls, type) and dataclasses.is_dataclass(cls) else None


def _build(kind: str, spec: dict[str, Any], where: _Where, field: str | None = None,
           changed: str | None = None) -> dict[str, Any]:  # fmt: skip
    """Every field of the ``kind`` spec built from ``spec`` (LEGACY ones written out too, so any field can be
    opened), each of the type its spec class declares (a whole number, text, an object ...); LessonError
    naming the step (and ``field``) otherwise.  ``changed``: the one top-level field that differs from a spec
    built already (a control's value), the only one whose type is checked again."""
    cls = _spec_class(kind)
    if changed is not None:
        spec_types = {changed: spec[changed]} if changed in spec else {}
    else:
        spec_types = spec
    if cls is not None and (problem := type_problem(spec_types, cls, nested_only=True)) is not None:
        path = ".".join(map(str, problem[0]))  # a nested spec given as a list or text: the spec cannot read it
        raise where.error(problem[1], f"spec.{path}" if field == "spec" else field)
    try:
        built = new_spec(kind, spec).all_fields()
    except StitchError as exc:
        raise where.error(str(exc), field) from exc
    except (TypeError, ValueError) as exc:
        raise where.error(f"the {kind} spec does not fit: {exc}", field) from exc
    if changed is not None:
        built_types = {changed: built[changed]} if changed in built else {}
    else:
        built_types = built
    if cls is not None and (problem := type_problem(built_types, cls)) is not None:
        path = ".".join(map(str, problem[0]))
        raise where.error(problem[1], f"spec.{path}" if field == "spec" else field)
    return built


def _models(raw: Any, where: _Where) -> dict[str, ZooRecipe]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise where.error('must map a name to a zoo recipe, e.g. {"A": {"arch": "cnn", "seed": 0}}', "models")
    if len(raw) > MAX_MODELS:
        raise where.error(f"a lesson trains at most {MAX_MODELS} models (got {len(raw)}); split it in two", "models")
    out = {}
    for alias, recipe in raw.items():
        field = f"models.{alias}"
        if not ALIAS.match(str(alias)):
            raise where.error("a model's name is a letter then letters, digits or _ (it is written @NAME)", field)
        if not isinstance(recipe, dict):
            raise where.error("must be a zoo recipe (a JSON object of ZooRecipe fields)", field)
        try:
            out[alias] = new_spec("zoo", recipe)
        except StitchError as exc:
            raise where.error(str(exc), field) from exc
        if (problem := type_problem(out[alias].all_fields(), ZooRecipe)) is not None:
            raise where.error(problem[1], field)
    return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _control(kind: str, spec: dict[str, Any], field: str, raw: Any, where: _Where) -> Control:
    """One open control, checked: its field exists, the lesson's own value is allowed, and so is every value it
    allows (each builds a valid spec); a range the page's slider can show (min below max, whole ends for a whole
    field, each end within :data:`~stitchcore.lessons.checks.MAX_NUMBER`), a choice a link can name."""
    name = f"open.{field}"
    if field in RESERVED:
        raise where.error(f"{field!r} is the page's own link parameter; it cannot be a control", name)
    if not isinstance(raw, dict):
        raise where.error('must be {"choices": [...]} or {"min": x, "max": y}', name)
    _unknown(raw, CONTROL_KEYS, where, name)
    try:
        current = get_field(spec, field)
    except KeyError:
        raise where.error(f"the {kind} spec has no field {field!r} (its fields: {', '.join(spec)})", name) from None
    words = field_words(kind, field)
    label = _text(raw, "label", where, required=False, field=f"{name}.label") or words.label
    help_ = _text(raw, "help", where, required=False, most=MAX_HELP, field=f"{name}.help") or words.help
    has_range = "min" in raw or "max" in raw
    if ("choices" in raw) == has_range:
        raise where.error('give either "choices" or "min" and "max"', name)
    if "choices" in raw:
        choices = raw["choices"]
        if not isinstance(choices, list) or len(choices) < 2:
            raise where.error("choices is a list of at least two values", name)
        if len(choices) > MAX_CHOICES:
            raise where.error(f"choices offers at most {MAX_CHOICES} values (got {len(choices)}); give a range, "
                              "or fewer choices", name)  # fmt: skip
        if not all(c is None or isinstance(c, (str, int, float, bool)) for c in choices):
            bad = next(c for c in choices if not (c is None or isinstance(c, (str, int, float, bool))))
            raise where.error(f"each choice is one value (text, a number, true, false or null), not {shown(bad)}",
                              name)  # fmt: skip
        read = getattr(_spec_class(kind), "read_data", None)  # a plain folder as today's spec reads it (streamed)
        choices = [read(field, c) for c in choices] if read is not None else choices
        said = [str(c) for c in choices]  # a link names a choice by its text
        if len(set(said)) < len(said):
            twice = next(c for c in choices if said.count(str(c)) > 1)
            raise where.error(f"the choice {shown(twice)} is given twice (or as another value that reads the same "
                              "in a link); give each once", name)  # fmt: skip
        if current not in choices:
            raise where.error(f"the step's own value {shown(current)} is not among the choices "
                              f"{shown(choices, 120)}", name)  # fmt: skip
        for choice in choices:
            _build(kind, set_field(spec, field, choice), where, name, changed=field.partition(".")[0])
        return Control(field, label, help_, choices=tuple(choices))
    low, high = raw.get("min"), raw.get("max")
    if not (_number(low) and _number(high)) or not low < high:
        raise where.error(f"min and max are numbers with min < max (got {shown(low)}, {shown(high)}): the "
                          "page shows a slider between them", name)  # fmt: skip
    if max(abs(low), abs(high)) > MAX_NUMBER:
        raise where.error(f"min and max lie within -{MAX_NUMBER:,} and {MAX_NUMBER:,} (got {low:g}, {high:g}): "
                          "the page's slider holds no larger number", name)  # fmt: skip
    if not _number(current):
        raise where.error(f"a range needs a numeric field; its value is {shown(current)} (give choices instead)", name)
    if not low <= current <= high:
        raise where.error(f"the step's own value {current:g} is outside {low:g} to {high:g}", name)
    integer = isinstance(current, int)
    if integer and not (float(low).is_integer() and float(high).is_integer()):
        raise where.error(f"{field} takes whole numbers; give whole min and max", name)
    for end in (low, high):
        _build(kind, set_field(spec, field, int(end) if integer else end), where, name, changed=field.partition(".")[0])
    return Control(field, label, help_, low=int(low) if integer else low, high=int(high) if integer else high,
                   integer=integer)  # fmt: skip


def _step(number: int, raw: Any, lesson: str, refs: dict[str, str], recipes: dict[str, ZooRecipe],
          count: int) -> Step:  # fmt: skip
    where = _Where(lesson, number)
    if not isinstance(raw, dict):
        raise where.error("a step is a JSON object with title, text, kind and spec")
    where.title = raw.get("title") if isinstance(raw.get("title"), str) else ""
    _unknown(raw, STEP_KEYS, where)
    title, text = _text(raw, "title", where), _text(raw, "text", where, most=None)
    meanings = tuple(dict.fromkeys(m.group(1) for m in MEANING.finditer(text)))
    for name in meanings:
        if name not in list_meanings():
            raise where.error(f"{{{{{name}}}}} names no number's meaning; use one of: {', '.join(list_meanings())}",
                              "text")
    if "preset" in raw:
        if "kind" in raw:
            raise where.error('give "kind" and "spec", or "preset" (a Traits preset\'s sweep), not both', "preset")
        if not isinstance(raw["preset"], str):
            raise where.error(f"names a Traits preset, e.g. \"inheritance\", not {shown(raw['preset'])}", "preset")
        try:
            preset = get_preset(raw["preset"])
        except StitchError as exc:
            raise where.error(str(exc), "preset") from exc
        index = raw.get("sweep", 1)
        if not isinstance(index, int) or isinstance(index, bool) or not 1 <= index <= len(preset.sweeps):
            raise where.error(f"preset {preset.name!r} has sweeps 1 to {len(preset.sweeps)}", "sweep")
        kind = "sweep"
        if not isinstance(raw.get("spec") or {}, dict):
            raise where.error("the fields of the preset's sweep to change, as a JSON object", "spec")
        overrides = _resolve(raw.get("spec") or {}, refs, where, "spec")
        # every field written out: the preset's own sweep (LEGACY values included), the Traits page's run
        spec = _build(kind, {**preset.sweeps[index - 1].all_fields(), **overrides}, where, "spec")
        made = {zoo_ref(r): r for r in preset.recipes}
    else:
        kind = raw.get("kind")
        if not isinstance(kind, str) or not kind:
            said = "missing" if kind is None else f"{shown(kind)} is not a run kind"
            raise where.error(f"{said}; name a run kind (stitch, sweep, matrix, similarity, merge ...)", "kind")
        try:
            get_experiment(kind)
        except StitchError as exc:
            raise where.error(str(exc), "kind") from exc
        if not isinstance(raw.get("spec"), dict):
            said = "missing" if raw.get("spec") is None else f"a {type(raw['spec']).__name__}"
            raise where.error(f"{said}; give the {kind} spec's fields as a JSON object", "spec")
        spec = _build(kind, _resolve(raw["spec"], refs, where, "spec"), where, "spec")
        made = {zoo_ref(r): r for r in recipes.values()}
    used = {v.partition("?")[0] for v in _strings(spec)}
    models = tuple(r for ref, r in made.items() if ref in used)
    open_raw = raw.get("open") or {}
    if not isinstance(open_raw, dict):
        raise where.error('must map a spec field to {"choices": [...]} or {"min": x, "max": y}', "open")
    for field in open_raw:
        parts = field.split(".")
        inside = next((p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p in open_raw), None)
        if inside is not None:
            raise where.error(f"opens {inside!r} and a field inside it; open one of them", f"open.{field}")
    controls = tuple(_control(kind, spec, str(f), c, where) for f, c in open_raw.items())
    beside = raw.get("beside")
    if beside is not None and (not isinstance(beside, int) or isinstance(beside, bool) or not 1 <= beside <= count
                               or beside == number):  # fmt: skip
        raise where.error(f"names another step of this lesson, 1 to {count}", "beside")
    return Step(number, title, text, kind, spec, models, controls, beside, dict(raw), meanings)


def _kind_of(value: Any) -> str:
    """A JSON value's kind in words: ``a list``, ``a number`` ..."""
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "text"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return "a number" if isinstance(value, (int, float)) else f"a {type(value).__name__}"


def _strings(value: Any) -> list[str]:
    """Every string inside a spec dict (model refs among them)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def parse_lesson(data: Any) -> Lesson:
    """A lesson from its file's JSON value, every step checked; LessonError naming the step and field."""
    if not isinstance(data, dict):
        raise LessonError(f"a lesson file holds one JSON object with name, title, summary and steps, not "
                          f"{_kind_of(data)}")  # fmt: skip
    name = data.get("name")
    where = _Where(name if isinstance(name, str) and name else "?")
    if (problem := json_problem(data)) is not None:
        path, message = problem
        if len(path) >= 2 and path[0] == "steps" and isinstance(path[1], int) and isinstance(data["steps"], list):
            step = data["steps"][path[1]]
            title = step.get("title") if isinstance(step, dict) and isinstance(step.get("title"), str) else ""
            where = _Where(where.lesson, path[1] + 1, title)
            path = path[2:]
        raise where.error(message, ".".join(map(str, path)) or None)
    if not isinstance(name, str) or not NAME.match(name):
        raise where.error(NAME_RULE, "name")
    _unknown(data, LESSON_KEYS, where)
    form = data.get("format", FORMAT)
    if type(form) is not int or form != FORMAT:
        raise where.error(f"this StitchLab reads lesson format {FORMAT}, not {shown(form)}", "format")
    title, summary = _text(data, "title", where), _text(data, "summary", where, required=False, most=None)
    recipes = _models(data.get("models"), where)
    refs = {alias: zoo_ref(r) for alias, r in recipes.items()}
    steps = data.get("steps")
    if not isinstance(steps, list) or not steps:
        said = "missing" if not steps else f"must be a list, not {_kind_of(steps)}"
        raise where.error(f"{said}; give a list of 1 to {MAX_STEPS} steps", "steps")
    if len(steps) > MAX_STEPS:
        raise where.error(f"a lesson has at most {MAX_STEPS} steps (got {len(steps)}); split it in two", "steps")
    parsed = tuple(_step(i, s, name, refs, recipes, len(steps)) for i, s in enumerate(steps, start=1))
    for step in parsed:
        if step.beside is not None and not (step.kind == "matrix" and parsed[step.beside - 1].kind == "similarity"):
            raise _Where(name, step.number, step.title).error(
                "beside joins a matrix step to a similarity step (drawn side by side)", "beside")
    source = {"format": FORMAT, "name": name, "title": title, "summary": summary, "models": data.get("models") or {},
              "steps": steps}  # fmt: skip
    return Lesson(name, title, summary, recipes, parsed, source)
