"""What a lesson's JSON may hold before any field is read: its shape (:func:`json_problem`: depth, numbers, text,
keys) and each spec field's type against its spec class (:func:`type_problem`: ``"epochs": 2.5`` is not a
whole number, ``"adapter": [1]`` is not an object), so a hostile file is one line, never a traceback.

Each returns None for a good value, else ``(path, message)``: the path of keys and list indexes to the value
(``("steps", 1, "spec", "epochs")``), the message what is wrong with it and what to write instead.

>>> json_problem({"steps": [{"spec": {"epochs": float("nan")}}]})
(('steps', 0, 'spec', 'epochs'), 'nan is not a number a lesson can hold; write a finite number')
>>> import json
>>> json_problem({"deep": json.loads("[" * 20 + "]" * 20)})[1]
'nests lists and objects more than 16 deep: a lesson is flat settings and text'
>>> from stitchcore.experiments.stitch import StitchSpec
>>> type_problem({"epochs": 2.5, "adapter": {"kind": "linear"}}, StitchSpec)
(('epochs',), 'epochs takes a whole number, not 2.5')
>>> type_problem({"adapter": [1]}, StitchSpec)
(('adapter',), 'adapter takes a JSON object of its fields, not [1]')
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
import unicodedata
from collections.abc import Mapping
from typing import Any

from stitchcore.errors import shown

__all__ = ["MAX_DEPTH", "MAX_KEY", "MAX_NUMBER", "Problem", "json_problem", "text_problem", "type_problem"]

MAX_DEPTH = 16  # lists and objects inside one another: a lesson's deepest is ~7 (steps, open, choices, a value)
MAX_KEY = 100  # characters in a key: keys are field names, model names and control fields (~40 at most)
MAX_NUMBER = 2**53 - 1  # the largest whole number the page, a link and JavaScript hold exactly

Path = tuple[str | int, ...]
Problem = tuple[Path, str]


def _control_char(text: str, allowed: str) -> str | None:
    """The first control character of ``text`` not in ``allowed`` (C0, DEL, C1 and format characters such as
    U+202E, which reorder what a terminal or page shows), or None."""
    for ch in text:
        if ch not in allowed and (ord(ch) < 32 or 127 <= ord(ch) < 160 or unicodedata.category(ch) == "Cf"):
            return ch
    return None


def text_problem(text: str, *, multiline: bool) -> str | None:
    """What is wrong with a title (``multiline=False``: one line) or a Markdown text: a control character.

    >>> text_problem("Step\\x1b[2J", multiline=False)
    "holds the control character '\\\\x1b'; write plain text"
    >>> text_problem("Two lines\\nof text", multiline=True) is None
    True
    """
    bad = _control_char(text, "\t\n\r" if multiline else "")
    if bad is not None:
        kind = "a line break" if bad in "\n\r" else f"the control character {bad!r}"
        return f"holds {kind}; write " + ("text" if multiline else "plain text")
    return None


def json_problem(value: Any) -> Problem | None:
    """The first value in ``value`` (a lesson's JSON) that no lesson holds: nesting past :data:`MAX_DEPTH`, a
    non-finite number, a whole number past :data:`MAX_NUMBER`, a key that is not short text, text that is not
    Unicode (a lone surrogate), or a non-JSON value.  Walked without recursion, so any depth is one answer."""
    stack: list[tuple[Path, Any, int]] = [((), value, 1)]
    while stack:
        path, node, depth = stack.pop()
        if isinstance(node, (dict, list, tuple)):
            if depth > MAX_DEPTH:
                return path, f"nests lists and objects more than {MAX_DEPTH} deep: a lesson is flat settings and text"
            if isinstance(node, dict):
                for key in node:
                    if not isinstance(key, str):
                        return path, f"has the key {shown(key)}; keys are text"
                    if len(key) > MAX_KEY:
                        why = f"is a key of {len(key):,} characters; keys are field names, at most {MAX_KEY}"
                        return (*path, key[:20] + "..."), why
                children = list(node.items())
            else:
                children = list(enumerate(node))
            stack.extend(((*path, k), v, depth + 1) for k, v in reversed(children))
        elif isinstance(node, bool) or node is None:
            continue
        elif isinstance(node, int):
            if abs(node) > MAX_NUMBER:
                return path, f"{shown(node, 24)} is too large; a lesson's whole numbers are at most {MAX_NUMBER:,}"
        elif isinstance(node, float):
            if not math.isfinite(node):
                return path, f"{node!r} is not a number a lesson can hold; write a finite number"
        elif isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError as exc:
                return path, f"holds {node[exc.start]!r}, half of a character (a lone surrogate); write it whole"
        else:
            return path, f"holds a {type(node).__name__}; a lesson holds JSON values (text, numbers, lists, objects)"
    return None


def _is_dataclass_type(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The field types of a spec dataclass (``from __future__ import annotations`` strings resolved)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls)}


def _words(hint: Any) -> str:
    """What a type hint asks for, in words: ``a whole number``, ``text or null`` ..."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(_words(a) for a in args))
    if hint is type(None):
        return "null"
    if hint is bool:
        return "true or false"
    if hint is int:
        return "a whole number"
    if hint is float:
        return "a number"
    if hint is str:
        return "text"
    if origin in (tuple, list):
        return "a list"
    if origin in (dict, Mapping) or hint is dict or _is_dataclass_type(hint):
        return "a JSON object" + (" of its fields" if _is_dataclass_type(hint) else "")
    return "another value"


def _fits(value: Any, hint: Any, path: Path) -> Problem | None:
    """None when the JSON ``value`` is what ``hint`` asks for, else where (the path inside it) and why."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or origin is typing.Literal:
        return None
    if origin in (typing.Union, types.UnionType):
        problems = [_fits(value, a, path) for a in args]
        if any(p is None for p in problems):
            return None
        deeper = [p for p in problems if p is not None and p[0] != path]  # the arm it matched, wrong inside
        return deeper[0] if deeper else (path, _words(hint))
    ok = True
    if hint is type(None):
        ok = value is None
    elif hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif hint is str:
        ok = isinstance(value, str)
    elif origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            return path, _words(hint)
        if origin is tuple and args and args[-1] is not Ellipsis and len(args) != len(value):
            return path, f"a list of {len(args)} values"
        each = args[0] if origin is list or (args and args[-1] is Ellipsis) else None
        for i, item in enumerate(value):
            inner = each if each is not None else (args[i] if args else Any)
            if (problem := _fits(item, inner, (*path, i))) is not None:
                return problem
    elif origin in (dict, Mapping) or hint is dict:
        ok = isinstance(value, dict)
    elif _is_dataclass_type(hint):
        if isinstance(value, hint):
            return None
        if not isinstance(value, dict):
            return path, _words(hint)
        return _fields(value, hint, path)
    return None if ok else (path, _words(hint))


def _fields(values: Mapping[str, Any], cls: type, path: Path) -> Problem | None:
    hints = _hints(cls)
    for name, value in values.items():
        if name in hints and (problem := _fits(value, hints[name], (*path, name))) is not None:
            return problem
    return None


def type_problem(values: Mapping[str, Any], cls: type, *, nested_only: bool = False) -> Problem | None:
    """The first field of ``values`` (a spec's fields as JSON) whose value is not of its ``cls`` field's type:
    ``(path, "epochs takes a whole number, not 2.5")``.  Keys ``cls`` lacks, and each value's range (a seed's
    ``0 .. MAX_SEED``), are left to the spec (it names them).  ``nested_only``: only the fields that hold a nested spec
    (what a spec reads as an object before any check of its own)."""
    hints = _hints(cls)
    for name, value in values.items():
        hint = hints.get(name)
        if hint is None:
            continue
        if nested_only and not any(_is_dataclass_type(a) for a in (hint, *typing.get_args(hint))):
            continue
        problem = _fits(value, hint, (name,))
        if problem is not None:
            where, wants = problem
            got = _value_at(values, where)
            return where, f"{'.'.join(map(str, where))} takes {wants}, not {shown(got)}"
    return None


def _value_at(values: Any, path: Path) -> Any:
    for part in path:
        values = values[part]
    return values
