"""One legacy-defaults mechanism for every kind (issue 40, item 3): a spec written by hand (a lesson step, the
API, ``new_spec``) gets today's defaults, a stored dict without a key gets what it computed when it was stored
(``Spec.LEGACY``), and the two never mix."""

from __future__ import annotations

from dataclasses import fields

import pytest

from stitchcore.experiments import get_experiment, list_experiments, new_spec
from stitchcore.experiments._spec import Spec, _plain

# The fields a kind cannot default (model refs, cuts): every other field is left out of the hand-written spec.
REQUIRED = {
    "assemble": {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1"},
    "lmdepth": {"a": "zoo:gpt-pydoc-s0", "b": "zoo:gpt-pydoc-s1"},
    "lmstitch": {"a": "zoo:gpt-pydoc-s0", "b": "zoo:gpt-pydoc-s1"},
    "matrix": {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1"},
    "merge": {"a": "zoo:gpt-pydoc-s0", "b": "zoo:gpt-pydoc-s1"},
    "similarity": {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1"},
    "stitch": {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "cut_a": "block1", "cut_b": "block1"},
    "sweep": {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1"},
    "transfer": {"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1"},
    "zoo": {},
}


def _spec_class(kind: str) -> type[Spec]:
    cls = getattr(get_experiment(kind).from_dict, "__self__", None)
    assert isinstance(cls, type) and issubclass(cls, Spec), f"{kind} is not registered with its Spec's from_dict"
    return cls


def test_every_kind_is_covered():
    assert set(REQUIRED) == set(list_experiments())


@pytest.mark.parametrize("kind", sorted(REQUIRED))
def test_a_hand_written_spec_gets_every_default_of_today(kind):
    cls = _spec_class(kind)
    made = new_spec(kind, REQUIRED[kind])
    today = cls(**REQUIRED[kind])  # the dataclass's own defaults (and its normalisations)
    for f in fields(cls):
        assert _plain(getattr(made, f.name)) == _plain(getattr(today, f.name)), (kind, f.name)
    assert made.to_dict() == today.to_dict()


@pytest.mark.parametrize("kind", sorted(REQUIRED))
def test_a_stored_dict_without_a_key_reads_its_legacy_value(kind):
    cls = _spec_class(kind)
    assert set(cls.LEGACY) <= {f.name for f in fields(cls)}, f"{kind}: LEGACY names a field the spec lacks"
    stored = cls.from_dict(REQUIRED[kind])
    for name, old in cls.LEGACY.items():
        # the stored reading, unless the spec itself holds another value as the same computation (e.g. a matrix
        # without controls keeps no twin rule): then it is what a spec made with the legacy value holds
        expected = getattr(cls(**{**REQUIRED[kind], name: old}), name)
        assert _plain(getattr(stored, name)) == _plain(expected), (kind, name)


def test_the_defaults_that_changed_reach_a_hand_written_spec():
    # the measured cases of issue 40: each reads the old value from a stored dict, today's from new_spec
    cases = [("matrix", {"controls": True}, "twin_seeds", "shared", "distinct"),
             ("matrix", {"controls": True}, "control_training", "as-matrix", "matched"),
             ("matrix", {"controls": True}, "noise_sender", False, True),
             ("lmstitch", {}, "until", "steps", "converged"), ("lmstitch", {}, "start", "init", "best"),
             ("lmdepth", {}, "until", "steps", "converged"), ("lmdepth", {}, "embed", "a", "tied"),
             ("sweep", {}, "noise_control", False, True), ("similarity", {}, "random_null_seeds", 1, 5)]  # fmt: skip
    for kind, extra, name, old, new in cases:
        fields_ = {**REQUIRED[kind], **extra}
        assert getattr(_spec_class(kind).from_dict(fields_), name) == old, (kind, name)
        assert getattr(new_spec(kind, fields_), name) == new, (kind, name)
