"""A spec as a Python call and back: the API's arguments are the spec's own fields (and a nested field's declared
key: ``init="random"`` is ``adapter={"init": "random"}``), and :func:`python_call` writes the call that makes a
stored run again, with the same run id ("Copy as Python")."""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from stitchcore.errors import StitchError

__all__ = ["FUNCTION_OF_KIND", "POSITIONAL", "python_call", "spec_from_call"]

# The API function of each run kind and the fields it takes by position (the rest by name).
FUNCTION_OF_KIND = {"zoo": "train", "stitch": "stitch", "matrix": "matrix", "similarity": "similarity",
                    "sweep": "sweep", "assemble": "assemble", "merge": "merge", "lmstitch": "lmstitch",
                    "lmdepth": "lmdepth", "transfer": "transfer"}  # fmt: skip
POSITIONAL = {"stitch": ("a", "b", "cut_a", "cut_b"), "lmstitch": ("a", "b", "cut_a", "cut_b"),
              "transfer": ("a", "b", "cut_a", "cut_b"), "zoo": ()}
PAIR = ("a", "b")  # every other two-model kind


def positional(kind: str) -> tuple[str, ...]:
    """The fields ``kind``'s function takes by position."""
    return POSITIONAL.get(kind, PAIR)


def _nested_keys(kind: str) -> dict[str, str]:
    """A nested field's declared key -> its dotted name (``init`` -> ``adapter.init``), where the key is not also a
    top-level field."""
    from stitchcore.params import declared, spec_class

    tops = {f.name for f in dataclasses.fields(spec_class(kind))}
    return {f.key: f.name for f in declared(kind) if "." in f.name and f.key not in tops}


def _as_plain(value: Any) -> Any:
    """A nested spec given as an object (``AdapterSpec(...)``) as the dict the spec reads."""
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) and not isinstance(value, type) else value


def spec_from_call(kind: str, fields: dict[str, Any]) -> Any:
    """The new ``kind`` spec a call's keyword arguments make: the spec's own fields (a nested one as a partial
    dict or a spec object), or a nested field's declared key; every other field at today's default.
    StitchError naming a field the kind does not have, with the close ones.

    >>> import stitchcore.experiments
    >>> s = spec_from_call("stitch", {"a": "zoo:x", "b": "zoo:y", "cut_a": "fc1", "cut_b": "fc1", "init": "random"})
    >>> s.adapter.init, s.adapter.kind, s.epochs
    ('random', 'linear', 10)
    >>> spec_from_call("stitch", {"a": "zoo:x", "b": "zoo:y", "cut_a": "fc1", "cut_b": "fc1", "epoch": 3})
    Traceback (most recent call last):
    stitchcore.errors.StitchError: a stitch has no field 'epoch' (did you mean epochs?)
    """
    from stitchcore.params import build_spec, spec_class

    tops = {f.name for f in dataclasses.fields(spec_class(kind))}
    nested = _nested_keys(kind)
    out: dict[str, Any] = {}
    for name, value in fields.items():
        if name in tops:
            value = _as_plain(value)
            if isinstance(value, dict) and isinstance(out.get(name), dict):
                value = {**out[name], **value}  # a key given beside it (init=...) and the dict: both
            out[name] = value
        elif name in nested:
            top, _, rest = nested[name].partition(".")
            if not isinstance(out.setdefault(top, {}), dict):
                out[top] = _as_plain(out[top])
            out[top][rest] = value
        else:
            close = difflib.get_close_matches(name, [*tops, *nested], n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else f"; it has {', '.join(sorted(tops))}"
            raise StitchError(f"a {kind} has no field {name!r}{hint}")
    try:
        return build_spec(kind, out)
    except (TypeError, ValueError, KeyError) as exc:
        raise StitchError(f"a {kind} spec: {exc}") from exc


def _changed(given: Any, today: Any) -> Any:
    """What of ``given`` differs from ``today`` (a nested dict: only its differing keys), or ``dataclasses.MISSING``."""
    if isinstance(given, dict) and isinstance(today, dict):
        diff = {k: v for k, v in given.items() if today.get(k, dataclasses.MISSING) != v}
        return diff or dataclasses.MISSING
    return dataclasses.MISSING if given == today else given


def _whole(spec: Any) -> dict[str, Any]:
    """Every field of ``spec`` (``all_fields``), a nested adapter's whole too: its ``to_dict`` leaves out the
    values a stored dict without the key means (a one-shot rescale), which today's default may not be."""
    out = spec.all_fields()
    for name in out:
        nested = getattr(spec, name)
        if callable(getattr(nested, "all_fields", None)):
            out[name] = nested.all_fields()
    return out


def python_call(kind: str, spec: Any, *, module: str = "stitchcore", store: str | None = None) -> str:
    """The call that makes ``spec`` again with the same run id: its models (and cuts) by position, then every
    field not at today's default (a stored run's older reading written out), then ``store=`` if given.

    >>> import stitchcore.experiments
    >>> s = spec_from_call("stitch", {"a": "zoo:x", "b": "zoo:y", "cut_a": "fc1", "cut_b": "fc1", "epochs": 3,
    ...                               "adapter": {"init": "random"}})
    >>> python_call("stitch", s)
    "stitchcore.stitch('zoo:x', 'zoo:y', 'fc1', 'fc1', adapter={'init': 'random'}, epochs=3)"
    """
    from stitchcore.store.records import run_id_for

    first = positional(kind)
    given = _whole(spec)
    required = {k: given[k] for k in first}
    today = _whole(spec_from_call(kind, required if first else {}))
    args = [repr(given[k]) for k in first]
    named = {}
    for name, value in given.items():
        if name in first:
            continue
        diff = _changed(value, today.get(name, dataclasses.MISSING))
        if diff is not dataclasses.MISSING:
            named[name] = diff
    where = [f"store={store!r}"] if store is not None else []
    call = f"{module}.{FUNCTION_OF_KIND[kind]}({', '.join([*args, *(f'{k}={v!r}' for k, v in named.items()), *where])})"
    again = spec_from_call(kind, {**required, **named})
    if run_id_for(kind, again.to_dict()) != run_id_for(kind, spec.to_dict()):  # a field a call cannot say
        raise StitchError(f"this {kind} run cannot be written as one call ({call} makes another run)")
    return call
