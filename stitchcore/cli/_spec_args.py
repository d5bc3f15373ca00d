"""A kind's CLI flags generated from its declared fields (:mod:`stitchcore.params`): each flag's name, type,
choices and help come from the declaration (help: the field's words and today's default), so a field added to
a kind is a flag without another line here.  A flag left out is left out of the spec, which takes today's
default (``Spec.new``).  The CLI does not clamp: a value beyond the spec's bound is refused by the spec,
naming the field and its flag.  Private to :mod:`stitchcore.cli`.

>>> import argparse, stitchcore.experiments
>>> p = argparse.ArgumentParser(); add_spec_flags(p, "stitch")
>>> args = p.parse_args(["--a", "zoo:x", "--b", "zoo:y", "--cut-a", "fc1", "--cut-b", "fc1", "--init", "random",
...                      "--epochs", "3", "--no-noise-control"])
>>> spec_values(args, "stitch")
{'a': 'zoo:x', 'b': 'zoo:y', 'cut_a': 'fc1', 'cut_b': 'fc1', 'adapter': {'init': 'random'}, 'epochs': 3, \
'noise_control': False}
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from stitchcore.cli._args import data_name, given, model_ref, number, whole
from stitchcore.experiments.field_words import field_words
from stitchcore.params import ALWAYS, Field, declared, defaults, form_values, held_fields

__all__ = ["add_spec_flags", "spec_argv", "spec_values", "with_defaults"]

_TYPES: dict[Any, Callable[[str], Any]] = {int: whole, float: number, str: given}
_ROLE_TYPES: dict[str, Callable[[str], Any]] = {"model": model_ref, "dataset": data_name, "cut": given}


def _arg_type(field: Field) -> Callable[[str], Any]:
    """The argparse type of ``field``'s flag: its own text reader (a pair, JSON), its role's, or its type's."""
    if field.parse is None:
        return _ROLE_TYPES.get(field.role, _TYPES[field.type])
    parse = field.parse

    def read(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    read.__name__ = field.key  # argparse names the type in its message
    return read


def _dest(field: Field) -> str:
    return field.key if field.type is not bool else ("no_" if _default_on(field) else "") + field.key


def _default_on(field: Field) -> bool:
    return defaults(field.kinds[0]).get(field.name) is True


def _help(kind: str, field: Field, default: Any) -> str:
    words = field_words(kind, field.name)
    text = words.help or words.label
    if field.type is bool:
        return (f"turns off (on by default): {text}" if default else text).replace("%", "%%")
    if default is not None and field.key not in ("a", "b"):
        text += f" (default: {field.text(default)})"
    if field.suggestions and field.check is None:  # a registry's names (measures): listed, checked by the spec
        text += f"; one of {', '.join(map(str, field.suggestions))}"
    return text.replace("%", "%%")


def add_spec_flags(parser: argparse.ArgumentParser, kind: str, *, required: Iterable[str] = ("a", "b", "cut_a",
                   "cut_b"), skip: Iterable[str] = (), aliases: Mapping[str, Iterable[str]] | None = None,
                   helps: Mapping[str, str] | None = None) -> None:  # fmt: skip
    """Add a flag for each of ``kind``'s declared fields (by link key) but ``skip``; ``required`` ones must be
    given.  A bool field that is on by default is switched off by ``--no-KEY``, one off by ``--KEY``.
    ``aliases``: older names a field's flag keeps answering to (``--eps`` for ``--sharpness-eps``), by link key;
    ``helps``: a help line that says more than the field's words (``--dataset`` also picks a preset's scale)."""
    must, skipped, own, old, said = set(required), set(skip), defaults(kind), aliases or {}, helps or {}
    for field in declared(kind):
        if field.key in skipped:
            continue
        default = own.get(field.name)
        help_ = said[field.key].replace("%", "%%") if field.key in said else _help(kind, field, default)
        if field.type is bool:
            flag = ("--no-" + field.key.replace("_", "-")) if default else field.flag
            parser.add_argument(flag, *old.get(field.key, ()), dest=_dest(field), action="store_true", help=help_)
            continue
        parser.add_argument(field.flag, *old.get(field.key, ()), dest=field.key, type=_arg_type(field),
                            choices=field.choices, required=field.key in must, default=None, help=help_)  # fmt: skip


def spec_values(args: argparse.Namespace, kind: str) -> dict[str, Any]:
    """The fields the command line gave (nested ones as dicts: ``{"adapter": {"init": "random"}}``), as typed:
    the spec checks them.  Flags left out are left out."""
    out: dict[str, Any] = {}
    for field in declared(kind):
        value = getattr(args, _dest(field), None)
        if field.type is bool:
            if not value:
                continue
            value = not _default_on(field)
        elif value is None:
            continue
        top, _, rest = field.name.partition(".")
        if rest:
            out.setdefault(top, {})[rest] = value
        else:
            out[top] = value
    return out


def with_defaults(args: argparse.Namespace, kind: str, *, skip: Iterable[str] = ()) -> argparse.Namespace:
    """A copy of ``args`` with each of ``kind``'s flags (but ``skip``, by link key) left out at today's default
    (for a command that reads the flags itself, e.g. ``stitch`` handing language models to ``merge``)."""
    out, own, skipped = argparse.Namespace(**vars(args)), defaults(kind), set(skip)
    for field in declared(kind):
        if field.key in skipped:
            continue
        if field.type is not bool and getattr(out, field.key, None) is None and field.name in own:
            setattr(out, field.key, own[field.name])
    return out


def spec_argv(kind: str, spec: Any, *, filled: dict[str, Any] | None = None, skip: Iterable[str] = ()) -> list[str]:
    """The flags that make ``spec`` again (its models and cuts, and each field not at today's default, or at what
    the verb fills in for a flag left out: ``filled``, by field name), but the fields whose link keys ``skip``
    names (a verb that says them in its own flags): the command line a run's view offers to copy.

    >>> import stitchcore.experiments
    >>> from stitchcore.params import build_spec
    >>> spec_argv("stitch", build_spec("stitch", {"a": "zoo:x", "b": "zoo:y", "cut_a": "fc1", "cut_b": "fc1",
    ...                                           "adapter": {"init": "random"}, "noise_control": False}))
    ['--a', 'zoo:x', '--b', 'zoo:y', '--cut-a', 'fc1', '--cut-b', 'fc1', '--init', 'random', '--no-noise-control']
    """
    own, values, out, held = defaults(kind), form_values(kind, spec), [], held_fields(spec)
    left_out = {**own, **(filled or {})}  # what a flag left out means
    for field in declared(kind):
        value = values[field.key] if field.none_as is None else field.spec_value(values[field.key])
        if value is None or field.name in held or field.key in skip or (
                field.key not in ALWAYS and field.name in left_out and value == left_out[field.name]):
            continue
        if field.type is bool:
            out.append(("--no-" + field.key.replace("_", "-")) if own.get(field.name) else field.flag)
        else:
            out += [field.flag, field.text(value)]
    return out
