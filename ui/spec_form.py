"""A kind's form generated from its declared fields (:mod:`stitchcore.params`): the widgets, the link prefill
(``?run=`` or the fields themselves), the link a form gives, the notes on link values the form could not use,
and the spec the widgets make.  A page draws its pickers (models, cuts, dataset: the fields with a ``role``)
itself and the rest with :func:`widgets`.

Widget keys are ``prefix + field.key``; the form's values live in ``st.session_state`` under them, so a link
fills the form once per URL (:func:`prefill`) and the widgets take their values from there, never twice.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import streamlit as st

from stitchcore.errors import StitchError
from stitchcore.experiments import spec_from_record
from stitchcore.experiments.field_words import field_words
from stitchcore.params import (
    Field, build_spec, declared, declared_field, form_defaults, link_params, read_link, spec_fields,
)  # fmt: skip
from stitchcore.stitching.adapters import NO_DOWNSAMPLE
from ui.errors import show_error
from ui.resources import get_store
from ui.text import plain

__all__ = ["fill", "from_link", "from_link_any", "link_params", "linked", "prefill", "show_link_notes", "show_refusal",
           "spec_from_form", "widgets"]

SHOWN = {NO_DOWNSAMPLE: "no downsample"}  # a list field's item in words where its spelling reads badly on a chip


def linked(kinds: str | Iterable[str], params: Mapping[str, str] | None = None) -> bool:
    """Whether the URL (``params``, else the page's) speaks to the form of ``kinds``: ``?run=`` or one of their
    fields' keys; for a page of several kinds also ``?experiment=``."""
    params = st.query_params.to_dict() if params is None else params
    several = not isinstance(kinds, str)
    kinds = tuple(kinds) if several else (kinds,)
    return ("run" in params or several and "experiment" in params
            or any(f.key in params for k in kinds for f in declared(k)))  # fmt: skip


def from_link(kind: str, *, prefix: str = "", state_keys: Mapping[str, str] | None = None,
              related: Iterable[str] = ()) -> dict[str, str] | None:  # fmt: skip
    """The page's URL into ``kind``'s form when it speaks to it (:func:`linked`): :func:`prefill`."""
    params = st.query_params.to_dict()
    return prefill(kind, params, prefix=prefix, state_keys=state_keys, related=related) if linked(kind, params) else None


def from_link_any(kinds: Iterable[str], chosen: str, *, state_keys: Mapping[str, str] | None = None,
                  picker_prefix: str | None = None) -> tuple[str, dict[str, str] | None]:  # fmt: skip
    """A page of several kinds, each form's keys prefixed ``{kind}_``: the kind the URL is for (``?run=``'s
    record's, else ``?experiment=``, else ``chosen``, the one the page shows) and what :func:`prefill` applied
    to its form (None: nothing new, or the URL is for no kind of ``kinds``)."""
    params, kinds = st.query_params.to_dict(), tuple(kinds)
    if not linked(kinds, params):
        return chosen, None
    rec = get_store().lookup(params["run"]) if "run" in params else None
    kind = rec.kind if rec is not None else params.get("experiment") or chosen
    if "run" in params and rec is None or kind not in kinds:
        return chosen, None
    return kind, prefill(kind, params, prefix=f"{kind}_", state_keys=state_keys, picker_prefix=picker_prefix)


def prefill(kind: str, params: Mapping[str, str], *, prefix: str = "", state_keys: Mapping[str, str] | None = None,
            related: Iterable[str] = (), picker_prefix: str | None = None) -> dict[str, str] | None:  # fmt: skip
    """Copy a link's values (or, for ``?run=ID``, that run's spec) into the form, once per URL: each held in
    what its field offers (:func:`stitchcore.params.hold`), a note for each that had to change (shown by
    :func:`show_link_notes`); a field the link leaves out is set to today's default (a link omits defaults;
    a dataset left out is the models' own), and a model it names is picked in its picker
    (``{picker_prefix}pick_<key>``; ``prefix`` by default).  A run of a ``related`` kind (a similarity run on
    the matrix form) fills only the pickers both kinds declare (models, cuts, data); the rest stays.
    Returns the link's parameters (the run's, for ``?run=``), or None when this URL was applied already or
    its run is not a run of ``kind`` (or ``related``) this version can read."""
    stamp, stamp_key = repr(sorted(params.items())), f"_{prefix}prefilled"
    if st.session_state.get(stamp_key) == stamp:
        return None
    st.session_state[stamp_key] = stamp
    whole = True  # the link says the whole form
    if "run" in params:
        rec = get_store().lookup(params["run"])
        if rec is None or rec.kind not in (kind, *related):
            return None
        try:
            params = link_params(rec.kind, spec_from_record(rec))
        except StitchError:  # a record this version cannot read: the run's view says why
            return None
        whole = rec.kind == kind
    shared = {f.key for f in declared(kind) if f.role}
    values, notes = read_link(kind, dict(params) if whole else {k: v for k, v in params.items() if k in shared})
    keys, own = dict(state_keys or {}), form_defaults(kind)
    pickers = prefix if picker_prefix is None else picker_prefix
    for field in declared(kind):  # a link says the whole form: a field it leaves out is at today's default
        if field.key in values:
            if field.role == "model":
                st.session_state[f"{pickers}pick_{field.key}"] = values[field.key]  # its picker (ui.pick_model)
        elif whole and ((not field.role and field.key in own) or field.role == "dataset"):  # data: the models' own
            st.session_state[keys.get(field.key, prefix + field.key)] = own.get(field.key)
    for key, value in values.items():
        st.session_state[keys.get(key, prefix + key)] = value
    st.session_state[f"_{prefix}url_notes"] = notes
    return dict(params)


def show_link_notes(prefix: str = "", *, clear: bool = False) -> list[str]:
    """The warning above a form that a link filled: each value it could not use as given (``clear``: no link
    now, the notes go).  Returns the notes, for the caption beside Launch."""
    if clear:
        st.session_state.pop(f"_{prefix}url_notes", None)
    notes = st.session_state.get(f"_{prefix}url_notes") or []
    if notes:
        st.warning("This link asked for values the form cannot use as given:\n\n"
                   + "\n".join(f"- {plain(n)}" for n in notes), icon=":material/warning:")
    return notes


def _format(field: Field) -> str | None:
    """A float box's printf format: its step's decimals, else as short as the value (``%g``: 0.0005, 2e-05)."""
    if field.type is not float:
        return None
    if field.step is None:
        return "%g"
    return f"%.{max(0, -math.floor(math.log10(field.step)) if field.step < 1 else 0)}f"


def _widget(kind: str, field: Field, where: Any, key: str, disabled: bool = False) -> Any:
    words = field_words(kind, field.name)
    label, help_, common = words.label, words.help or None, {"persist_state": "session", "disabled": disabled}
    if field.type is bool:
        return where.checkbox(label, key=key, help=help_, **common)
    if field.items is not None:  # a list of fixed values: a multiselect (a link's or a spec's tuple as its list)
        if isinstance(st.session_state.get(key), tuple):
            st.session_state[key] = list(st.session_state[key])
        return where.multiselect(label, field.items, key=key, help=help_, format_func=lambda v: SHOWN.get(v, v),
                                 **common)  # fmt: skip
    if field.type in (tuple, dict) and field.parse is not None:  # a list or a dict written out (3:8, JSON)
        if st.session_state.get(key) is not None and not isinstance(st.session_state[key], str):
            st.session_state[key] = field.text(st.session_state[key])  # a spec's or a link's value, as text
        return where.text_input(label, key=key, help=help_, **common)
    if field.choices is not None or field.suggestions:
        options = list(field.choices if field.choices is not None else field.suggestions)
        if field.choices is None and st.session_state.get(key) not in options:
            options.append(st.session_state[key])  # a link's own formula (task+0.25*match) stays choosable
        return where.selectbox(label, options, key=key, help=help_, **common)
    if field.type in (int, float):
        low, high = (field.low, field.high) if field.type is float else (
            None if field.low is None else int(field.low), None if field.high is None else int(field.high))
        step = field.step if field.step is not None else (1 if field.type is int else None)
        return where.number_input(label, low, high, step=step, format=_format(field), key=key, help=help_,
                                  **common)  # fmt: skip
    return where.text_input(label, key=key, help=help_, **common)


def widgets(kind: str, keys: Iterable[str] | None = None, *, per_row: int = 4, prefix: str = "",
            disabled: Iterable[str] = ()) -> dict[str, Any]:
    """Draw ``kind``'s plain fields (``keys``, in declaration order; None: every field without a role) in rows
    of ``per_row``; their values by link key.  Each widget's label and help are the field's words; the fields
    named (by spec field name) in ``disabled`` are drawn greyed out: the spec says they are unused."""
    off = set(disabled)
    wanted = None if keys is None else set(keys)
    fields = [f for f in declared(kind) if (f.key in wanted if wanted is not None else not f.role)]
    own = form_defaults(kind)
    for f in fields:
        st.session_state.setdefault(prefix + f.key, own.get(f.key))
    out = {}
    for start in range(0, len(fields), per_row):
        row = fields[start:start + per_row]
        for where, field in zip(st.columns(per_row), row, strict=False):
            out[field.key] = _widget(kind, field, where, prefix + field.key, field.name in off)
    return out


def fill(kind: str, fields: Mapping[str, Any], *, prefix: str = "") -> None:
    """Put spec ``fields`` (by name, nested ones as partial dicts: a named recipe's) into the form's widgets;
    the fields not named keep their values."""
    for field in declared(kind):
        top, _, rest = field.name.partition(".")
        if top not in fields:
            continue
        value = fields[top]
        if rest:
            if not isinstance(value, Mapping) or rest not in value:
                continue
            value = value[rest]
        st.session_state[prefix + field.key] = field.form_value(value)


def spec_from_form(kind: str, values: Mapping[str, Any], **given: Any) -> Any:
    """The spec the form's ``values`` (by link key) and the page's own ``given`` fields make: every field the
    form leaves out at today's default (``Spec.new``); StitchError when the spec refuses a value."""
    fields = spec_fields(kind, dict(values))
    for name, value in given.items():
        if isinstance(value, dict) and isinstance(fields.get(name), dict):
            fields[name] = {**fields[name], **value}
        else:
            fields[name] = value
    return build_spec(kind, fields)


def _apply(updates: dict[str, Any]) -> None:
    st.session_state.update(updates)


def show_refusal(kind: str, exc: StitchError, *, prefix: str = "", key: str = "fix") -> None:
    """The spec's refusal in one red line and, where one change of a declared field makes the form valid
    (``exc.fix``), a button that makes it ("Use Adapter start random"): the form never only says no."""
    show_error(exc)
    updates, words = {}, []
    for name, value in getattr(exc, "fix", {}).items():
        field = declared_field(kind, name)
        if field is None or field.role:
            continue
        updates[prefix + field.key] = field.form_value(value)
        shown = "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        words.append(f"{field_words(kind, name).label} {shown}")
    if updates:
        st.button(f"Use {' and '.join(words)}", key=f"{prefix}{key}", on_click=_apply, args=(updates,),
                  icon=":material/auto_fix_high:")  # fmt: skip
