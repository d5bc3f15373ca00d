"""Each spec field declared once: its type, the values a form offers (choices or a range), its link key, its
CLI flag and the kinds of run it belongs to; :func:`hold`, the one function that holds a value a person gave
(a link's text, a lesson control's value, a widget's) inside what is offered, with a note when it had to change.

A field's label and help line live in :mod:`stitchcore.experiments.field_words` (one table for every kind);
the kinds declare their fields beside their specs (``stitchcore.experiments.stitch_fields``), and the faces
are generated from the declaration: the page's widgets and link prefill (``ui.spec_form``), the CLI's flags
(``stitchcore.cli._spec_args``) and a lesson's open controls (a declaration narrowed to the lesson's range).

The range is what a form offers, well inside the spec's own bound (the spec refuses beyond it, naming the
field and its flag; the CLI passes values straight to the spec, so it refuses rather than clamps).

>>> epochs = Field("epochs", int, low=0, high=500)
>>> hold(epochs, "100000", who="epochs=")
Held(value=500, note='epochs=100000 is outside 0 to 500: using 500')
>>> hold(Field("head", str, choices=("b", "a")), "zzz", who="head=", own="b").note
"head='zzz' is not one the form offers (b, a): using 'b'"
>>> hold(epochs, "abc", who="epochs=").value is None
True

A list field may offer a fixed set of values, each item one of them (``items``: a multiselect on a page);
an item it does not offer is left out, with a note:

>>> hold(Field("norms", tuple, parse=names_text, items=("none", "both")), "both,nope", who="norm=")
Held(value=('both',), note="norm='both,nope' names 'nope', not one the form offers (each of none, both): using 'both'")
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from stitchcore.errors import StitchError

__all__ = ["FLAG_WORDS", "Field", "Held", "declare", "declared", "declared_field", "defaults", "form_values", "hold",
           "ALWAYS", "build_spec", "held_fields", "json_object_text", "json_words", "names_text", "pair_text", "pair_words",
           "wholes_text", "wholes_words", "form_defaults", "link_params", "read_link", "spec_class", "spec_fields"]

# What a link's number may look like before int() / float() reads it (ASCII digits, not "²"; not 5,000 digits)
_NUMBER = re.compile(r"[-+]?(\d{1,12}(\.\d{0,12})?|\.\d{1,12})(e[-+]?\d{1,3})?|[-+]?(inf|nan)",
                     re.IGNORECASE | re.ASCII)
FLAG_WORDS = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False,
              "off": False}  # fmt: skip
MAX_SHOWN = 40  # characters of a given value a note repeats (a 10 KB link value is said by its start)


@dataclass(frozen=True)
class Field:
    """One spec field as every face shows it.

    ``name`` is the spec's (dotted for a nested one: ``adapter.init``); ``key`` the link's and the form's
    (``init``; default: the name's last part); ``flag`` the CLI's (default ``--`` and the key with dashes;
    a bool field whose default is True is switched off by ``--no-KEY``).  ``none_as``: the form's value for
    the spec's None (``0`` images: all of them).  ``check``: a further test of a value (an objective's
    formula), raising StitchError with the reason.  ``items``: a list field's fixed values, each item one of
    them (``choices`` is one value's: a command line's flag checks its whole text against them).
    """

    name: str
    type: type  # int, float, str or bool
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    key: str = ""
    flag: str = ""
    none_as: Any = None
    check: Callable[[Any], None] | None = None
    suggestions: tuple[Any, ...] = ()  # what a form offers of a free value (any other passes ``check``)
    step: float | None = None  # a number widget's step (its decimals follow)
    role: str = ""  # model | cut | dataset: a picker of its own on a page; "": a plain value
    parse: Callable[[str], Any] | None = None  # how a link's or a flag's text reads (a pair "3:8", JSON)
    write: Callable[[Any], str] | None = None  # the reverse: a value as that text
    kinds: tuple[str, ...] = ()
    items: tuple[Any, ...] | None = None  # a list field's offered values: each item one of these (a multiselect)

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.name.rpartition(".")[2])
        if not self.flag:
            object.__setattr__(self, "flag", "--" + self.key.replace("_", "-"))

    def narrowed(self, *, low: float | None = None, high: float | None = None,
                 choices: Iterable[Any] | None = None) -> Field:
        """This field offering less (a lesson's open control): a range inside, or other choices.

        >>> Field("epochs", int, low=0, high=500).narrowed(low=0, high=10).high
        10
        """
        return replace(self, low=self.low if low is None else low, high=self.high if high is None else high,
                       choices=self.choices if choices is None else tuple(choices))  # fmt: skip

    def describe(self) -> str:
        """What it offers, in words: ``0 to 500`` or ``b, a``."""
        if self.choices is not None:
            return ", ".join(map(str, self.choices))
        if self.items is not None:
            return "each of " + ", ".join(map(str, self.items))
        if self.low is not None and self.high is not None:
            return f"{self.low:g} to {self.high:g}"
        return "any " + {int: "whole number", float: "number", bool: "true or false"}.get(self.type, "text")

    def form_value(self, value: Any) -> Any:
        """A spec's value as the form holds it (None -> ``none_as``)."""
        return self.none_as if value is None and self.none_as is not None else value

    def spec_value(self, value: Any) -> Any:
        """A form's value as the spec takes it (``none_as`` -> None; numbers as their type)."""
        if self.none_as is not None and value == self.none_as:
            return None
        if self.type is tuple and isinstance(value, list):  # a multiselect's list
            return tuple(value)
        if self.type in (tuple, dict) and self.parse is not None and isinstance(value, str):  # a text box's
            return self._parsed(value)
        if self.type is int and isinstance(value, float) and value.is_integer():
            return int(value)
        if self.type is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return round(float(value), 10)  # a widget's 0.1 + 0.05 steps: 0.15, not 0.15000000000000002
        return value

    def _parsed(self, text: str) -> Any:
        """A text box's list or dict (``3:8``, ``{"width": 32}``) as the spec takes it; empty: the empty value
        (None where the text cannot be empty: no relabelling).  StitchError naming the field otherwise.

        >>> Field("relabel", tuple, parse=pair_text).spec_value(" "), Field("relabel", tuple, parse=pair_text).spec_value("3:8")
        (None, (3, 8))
        """
        try:
            return self.parse(text) if text.strip() else ({} if self.type is dict else self.parse(""))
        except ValueError as exc:
            if not text.strip():
                return None
            raise StitchError(f"{self.key}: {exc}") from None

    def text(self, value: Any) -> str:
        """A value as a link or a command line writes it: ``true``/``false``, a list comma-separated (what a
        ``parse`` such as a sweep's cut list reads back), a dict as JSON, anything else as ``str``.

        >>> Field("positions", tuple).text(("block1", "fc1")), Field("control", bool).text(False)
        ('block1,fc1', 'false')
        """
        if self.write is not None:  # its own spelling (a pair 3:8), what its ``parse`` reads back
            return self.write(value)
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, (list, tuple)):
            return ",".join(map(str, value))
        if isinstance(value, dict):
            return json.dumps(value)
        return str(value)


@dataclass(frozen=True)
class Held:
    """What :func:`hold` made of a value: the value to use (None: the value was unreadable and the caller keeps
    its own) and a note when it is not what was given."""

    value: Any
    note: str | None = None


def _shown(raw: Any) -> str:
    text = str(raw)
    text = text if len(text) <= MAX_SHOWN else f"{text[:MAX_SHOWN - 3]}... ({len(text):,} characters)"
    return repr(text) if isinstance(raw, str) and not _NUMBER.fullmatch(raw.strip()) else text


def pair_text(text: str) -> tuple[int, int]:
    """``"X:Y"`` as two whole numbers (a relabelling: class X labelled Y); ValueError otherwise.

    >>> pair_text("3:8")
    (3, 8)
    """
    parts = text.split(":")
    if len(parts) != 2 or not all(re.fullmatch(r"\s*[0-9]{1,6}\s*", p) for p in parts):
        raise ValueError(f"expected X:Y (two class indices), not {_shown(text)}")
    return int(parts[0]), int(parts[1])


def names_text(text: str) -> tuple[str, ...]:
    """Comma-separated names (cuts) as a tuple; ``()`` for none.

    >>> names_text("block1, fc1,")
    ('block1', 'fc1')
    """
    return tuple(n.strip() for n in text.split(",") if n.strip())


def pair_words(value: tuple[int, int]) -> str:
    """A pair as :func:`pair_text` reads it: ``3:8``."""
    return f"{value[0]}:{value[1]}"


def json_words(value: Any) -> str:
    """A value as compact JSON text."""
    return json.dumps(value, separators=(",", ":"))


def wholes_words(value: tuple[int, ...]) -> str:
    """Whole numbers as :func:`wholes_text` reads them: ``0,1,5``."""
    return ",".join(map(str, value))


def json_object_text(text: str) -> dict[str, Any]:
    """A JSON object's text as a dict; ValueError otherwise.

    >>> json_object_text('{"width": 32}')
    {'width': 32}
    """
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({getattr(exc, 'msg', exc)}): {_shown(text)}") from None
    except RecursionError:  # '[' * 10**5
        raise ValueError(f"not JSON (nested too deep): {_shown(text)}") from None
    if not isinstance(value, dict):
        raise ValueError('expected a JSON object, e.g. {"width": 32}')
    return value


def wholes_text(text: str) -> tuple[int, ...]:
    """Comma-separated whole numbers (epochs to keep: ``"0,1,5"``); ValueError otherwise.

    >>> wholes_text("0, 1,5")
    (0, 1, 5)
    """
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not all(re.fullmatch(r"[0-9]{1,9}", p) for p in parts):
        raise ValueError(f"expected whole numbers separated by commas, e.g. 0,1,5, not {_shown(text)}")
    return tuple(int(p) for p in parts)


def _read(field: Field, raw: Any) -> Any:
    """``raw`` (text from a link, or a typed value) as the field's type; ValueError when it is not one."""
    if field.parse is not None:
        try:
            return field.parse(raw) if isinstance(raw, str) else raw
        except ValueError as exc:
            raise ValueError(f"not readable ({exc})") from None
    if field.type is bool:
        if isinstance(raw, bool):
            return raw
        flag = FLAG_WORDS.get(str(raw).strip().lower())
        if flag is None:
            raise ValueError("not true or false")
        return flag
    if field.type in (int, float):
        if isinstance(raw, bool):
            raise ValueError("not a number")
        if isinstance(raw, str):  # int("²") and int() of 5,000 digits raise, "1_0" is 10: the regex first
            if not _NUMBER.fullmatch(raw.strip()):
                raise ValueError("not a number")
            raw = float(raw)
        if not isinstance(raw, (int, float)):
            raise ValueError("not a number")
        return raw
    if field.choices is not None and not isinstance(raw, str):  # a lesson's choice may be a number or None
        return raw
    return str(raw)


def hold(field: Field, raw: Any, *, who: str = "", own: Any = None, offers: str = "the form") -> Held:
    """``raw`` held inside what ``field`` offers, and a note when it had to change (``who`` names the value in
    the note: ``epochs=`` for a link, a control's label for a lesson; ``offers`` names who offers the choices;
    ``own`` is used for a choice not offered and an unreadable number; None there: the caller keeps its own).

    Numbers outside the range are clamped to its nearer end (a whole-number field rounds), not-finite ones
    and unknown choices take ``own``, a failed ``check`` takes ``own``.

    >>> hold(Field("lr", float, low=1e-5, high=1.0), "nan", who="lr=", own=0.01)
    Held(value=0.01, note='lr=nan is not a finite number: using 0.01')
    >>> hold(Field("seeds", int, low=1, high=20), 2.6).value
    3
    >>> hold(Field("noise_control", bool), "off")
    Held(value=False, note=None)
    """
    who = who or field.key + "="
    try:
        value = _read(field, raw)
    except ValueError as exc:
        if own is None:
            return Held(None, f"{who}{_shown(raw)} is {exc}: the form keeps its own")
        return Held(own, f"{who}{_shown(raw)} is {exc}: using {_said(own)}")
    if field.items is not None:
        return _hold_items(field, value, raw, who, own, offers)
    if field.choices is not None:
        for choice in field.choices:  # a link names a choice by its text
            if value == choice or str(value) == str(choice):
                return Held(choice)
        return Held(own, f"{who}{_shown(raw)} is not one {offers} offers ({field.describe()}): using {_said(own)}")
    if field.type in (int, float) and not isinstance(value, bool):
        if not math.isfinite(value):
            return Held(own, f"{who}{_shown(raw)} is not a finite number: using {_said(own)}")
        inside = value
        if field.low is not None:
            inside = max(inside, field.low)
        if field.high is not None:
            inside = min(inside, field.high)
        held = int(round(inside)) if field.type is int else float(inside)
        if inside != value:
            return Held(held, f"{who}{value:g} is outside {field.describe()}: using {held:g}")
        if held != value:
            return Held(held, f"{who}{value:g} is not a whole number: using {held:g}")
        return Held(held)
    if field.check is not None:
        try:
            field.check(value)
        except StitchError as exc:
            return Held(own, f"{who}{_shown(raw)}: {str(exc).splitlines()[0][:200]}; using {_said(own)}")
    return Held(value)


def _hold_items(field: Field, value: Any, raw: Any, who: str, own: Any, offers: str) -> Held:
    """A list held to the items ``field`` offers: each named by its text, those not offered and repeats left
    out (with a note); ``own`` when none is left."""
    given = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    kept, unknown = [], []
    for item in given:
        match = next((c for c in field.items or () if item == c or str(item) == str(c)), None)
        if match is None:
            unknown.append(item)
        elif match not in kept:
            kept.append(match)
    if not kept:
        return Held(own, f"{who}{_shown(raw)} names none {offers} offers ({field.describe()}): using {_said(own)}")
    if unknown:
        named = ", ".join(repr(str(i)) for i in unknown)
        return Held(tuple(kept), f"{who}{_shown(raw)} names {named}, not one {offers} offers ({field.describe()}): "
                                 f"using {_said(kept)}")  # fmt: skip
    if len(kept) != len(given):
        return Held(tuple(kept), f"{who}{_shown(raw)} names a value twice: using {_said(kept)}")
    return Held(tuple(kept))


def _said(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return repr(",".join(map(str, value)))  # as a link writes it
    return f"{value:g}" if isinstance(value, (int, float)) else repr(value)


_DECLARED: dict[str, dict[str, Field]] = {}
_SPECS: dict[str, type] = {}
_BY_KEY: dict[str, dict[str, Field]] = {}


def declare(kind: str, fields: Iterable[Field], *, spec: type) -> tuple[Field, ...]:
    """Declare ``kind``'s fields (in the order its forms show them) and its spec class (a dataclass whose
    nested fields, such as ``adapter``, are dataclasses too); each field gets ``kind`` among its kinds."""
    out = tuple(replace(f, kinds=tuple(dict.fromkeys((*f.kinds, kind)))) for f in fields)
    keys = [f.key for f in out]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{kind}: two fields share a link key: {keys}")
    _DECLARED[kind] = {f.name: f for f in out}
    _BY_KEY[kind] = {f.key: f for f in out}
    _SPECS[kind] = spec
    return out


def declared(kind: str) -> tuple[Field, ...]:
    """``kind``'s declared fields, in order; () for a kind that declares none (yet).

    >>> import stitchcore.experiments  # the kinds declare their fields when they register
    >>> [f.key for f in declared("stitch")][:4]
    ['a', 'b', 'cut_a', 'cut_b']
    """
    return tuple(_DECLARED.get(kind, {}).values())


def declared_field(kind: str, name: str) -> Field | None:
    """The declaration of ``kind``'s field ``name`` (dotted for a nested one), or None."""
    return _DECLARED.get(kind, {}).get(name)


def _default(cls: type, name: str) -> Any:
    f = cls.__dataclass_fields__[name]  # type: ignore[attr-defined]
    return f.default if f.default_factory is dataclasses.MISSING else f.default_factory()


def defaults(kind: str) -> dict[str, Any]:
    """Today's default of each of ``kind``'s declared fields (the spec dataclass's, nested ones read from the
    default nested spec: a stitch's ``adapter.init`` is ``lstsq``), by field name; required fields left out.

    >>> import stitchcore.experiments
    >>> d = defaults("stitch"); d["adapter.init"], d["epochs"], "a" in d
    ('lstsq', 10, False)
    """
    cls, out = _SPECS[kind], {}
    for f in declared(kind):
        top, _, rest = f.name.partition(".")
        value = _default(cls, top)
        if value is dataclasses.MISSING:
            continue
        out[f.name] = getattr(value, rest) if rest else value
    return out


def form_values(kind: str, spec: Any) -> dict[str, Any]:
    """A spec's declared fields as a form holds them, by link key (None -> each field's ``none_as``)."""
    out, said = {}, getattr(spec, "said_data", None)  # data as a new spec must be told it (a stored plain folder)
    for f in declared(kind):
        value = spec
        for part in f.name.split("."):
            value = getattr(value, part)
        out[f.key] = f.form_value(said(f.name, value) if said is not None else value)
    return out


def spec_fields(kind: str, values: dict[str, Any]) -> dict[str, Any]:
    """Form values by link key -> the spec's fields (nested ones as dicts), each as the spec takes it; keys not
    given are left out (the spec's defaults fill them)."""
    out: dict[str, Any] = {}
    for f in declared(kind):
        if f.key not in values:
            continue
        top, _, rest = f.name.partition(".")
        value = f.spec_value(values[f.key])
        if rest:
            out.setdefault(top, {})[rest] = value
        else:
            out[top] = value
    return out


def build_spec(kind: str, fields: dict[str, Any]) -> Any:
    """A new ``kind`` spec from ``fields`` (nested ones as partial dicts): a nested field left out takes the
    default nested spec's value (a stitch given ``{"adapter": {"norm": "none"}}`` keeps its ``lstsq`` start),
    every other field today's default (``Spec.new``).  The page and the CLI make their specs here.

    >>> import stitchcore.experiments
    >>> s = build_spec("stitch", {"a": "zoo:x", "b": "zoo:y", "cut_a": "fc1", "cut_b": "fc1",
    ...                           "adapter": {"norm": "none"}})
    >>> s.adapter.init, s.adapter.norm, s.epochs
    ('lstsq', 'none', 10)
    >>> t = build_spec("lmstitch", {"a": "zoo:x", "b": "zoo:y", "adapter": {"kind": "lowrank", "rank": 4}})
    >>> t.adapter.kind, t.adapter.norm, t.adapter.resample   # the LM adapter's own: no norm, no resampling
    ('lowrank', 'none', 'none')
    """
    cls, out = _SPECS[kind], {k: (dict(v) if isinstance(v, dict) else v) for k, v in fields.items()}
    for top, value in out.items():  # every part of the kind's own default nested spec, declared or not
        base = _default(cls, top) if isinstance(value, dict) else None
        if dataclasses.is_dataclass(base):
            out[top] = {**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)}, **value}
    return cls.new(out)


ALWAYS = ("a", "b", "cut_a", "cut_b")  # a link names its models and cuts even at their defaults


def form_defaults(kind: str) -> dict[str, Any]:
    """Today's default of each declared field as a form holds it, by link key (required fields left out)."""
    by_name = defaults(kind)
    return {f.key: f.form_value(by_name[f.name]) for f in declared(kind) if f.name in by_name}


def held_fields(spec: Any) -> tuple[str, ...]:
    """The fields ``spec`` holds at one value whatever was given (its kind's ``held_fields()``, if it has one:
    a matrix without controls holds their twins' seeds): a link and a command line leave them out."""
    held = getattr(spec, "held_fields", None)
    return tuple(held()) if callable(held) else ()


def link_params(kind: str, spec: Any, *, explicit: Iterable[str] = ()) -> dict[str, str]:
    """A spec as link parameters: its models and cuts, and every other declared field whose value is not
    today's default (a run stored before a field existed says its old value: ``val_fraction=0.0``) and that
    the spec does not hold whatever is given (:func:`held_fields`); the keys in ``explicit`` are written even
    at today's default (a matrix cell's adapter: the link keeps its meaning when a default changes).

    >>> import stitchcore.experiments
    >>> s = build_spec("stitch", {"a": "zoo:x", "b": "zoo:y", "cut_a": "fc1", "cut_b": "fc1", "epochs": 3})
    >>> link_params("stitch", s)
    {'a': 'zoo:x', 'b': 'zoo:y', 'cut_a': 'fc1', 'cut_b': 'fc1', 'epochs': '3'}
    """
    own, out, fields, held = form_defaults(kind), {}, {f.key: f for f in declared(kind)}, held_fields(spec)
    always = {*ALWAYS, *explicit}
    for key, value in form_values(kind, spec).items():
        if value is None or fields[key].name in held or (key not in always and key in own and value == own[key]):
            continue
        out[key] = fields[key].text(value)
    return out


def read_link(kind: str, params: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """A link's parameters as form values by link key, each held in what its field offers (:func:`hold`, the
    form's default for what cannot be used), and the notes on those that had to change.  Fields with a role
    (models, cuts, a dataset) are passed as given (a list read by its ``parse``): their pickers check them
    against the models.

    >>> import stitchcore.experiments
    >>> read_link("stitch", {"epochs": "9999", "keep": "best", "x": "1"})
    ({'epochs': 500, 'keep': 'best'}, ['epochs=9999 is outside 0 to 500: using 500'])
    """
    own, values, notes = form_defaults(kind), {}, []
    for field in declared(kind):
        if field.key not in params:
            continue
        if field.role and field.parse is None:
            values[field.key] = params[field.key]
            continue
        held = hold(field, params[field.key], who=f"{field.key}=", own=own.get(field.key))
        if held.value is not None:
            values[field.key] = held.value
        if held.note:
            notes.append(held.note)
    return values, notes


def spec_class(kind: str) -> type:
    """The spec class ``kind`` declared its fields with."""
    return _SPECS[kind]
