from dataclasses import replace
from pathlib import Path

import pytest

from stitchcore.errors import StitchError
from stitchcore.experiments import get_experiment, list_experiments, register_experiment, spec_from_record
from stitchcore.experiments.merge import LMStitchSpec
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.stitching.train import parse_objective
from stitchcore.store.results import RunRecord, Store, run_id_for
from tests.conftest import copy_store


def test_recipe_names_and_roundtrip():
    r = ZooRecipe(arch="cnn", dataset="digits", seed=3, optimizer="adamw")
    assert r.short_name() == "cnn-digits-s3-adamw"
    assert r.is_plain()
    assert not ZooRecipe(epochs=5).is_plain()
    assert ZooRecipe.from_dict(r.to_dict()) == r
    assert ZooRecipe(relabel=[3, 8]).relabel == (3, 8)


def test_recipe_validation_names_the_fix():
    with pytest.raises(StitchError, match="optimizer"):
        ZooRecipe(optimizer="adam")
    with pytest.raises(StitchError, match="unknown ZooRecipe field"):
        ZooRecipe.from_dict({"arch": "cnn", "epochz": 3})


def test_objective_parsing():
    assert parse_objective("task") == {"task": 1.0}
    assert parse_objective("task + 0.5*match") == {"task": 1.0, "match": 0.5}
    with pytest.raises(StitchError, match="objective"):
        parse_objective("tsk")


def test_stitch_spec_key_is_stable_and_sensitive():
    s = StitchSpec(a="zoo:a", b="zoo:b", cut_a="fc1", cut_b="fc1")
    again = StitchSpec.from_dict(s.to_dict())
    assert again == s
    assert run_id_for("stitch", s.to_dict()) == run_id_for("stitch", again.to_dict())
    other = StitchSpec(a="zoo:a", b="zoo:b", cut_a="fc1", cut_b="fc1", adapter=AdapterSpec(init="random"))
    assert run_id_for("stitch", s.to_dict()) != run_id_for("stitch", other.to_dict())


def test_one_stitch_default_for_the_page_and_the_cli():
    """The default adapter starts from least squares, and the CLI's --init default is read from the spec."""
    from stitchcore.cli.main import build_parser

    assert StitchSpec(a="zoo:a", b="zoo:b", cut_a="fc1", cut_b="fc1").adapter.init == "lstsq"
    args = build_parser().parse_args(["stitch", "--a", "zoo:a", "--b", "zoo:b", "--cut-a", "fc1", "--cut-b", "fc1"])
    assert args.init == "lstsq"


# -- contract tests over the experiment registry (every registered kind, none listed by hand) ----------------------

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "store_v1"  # one run of every kind, by the old code
# Kinds the v1 fixture has no run of: an example spec each (a new kind fails test_every_kind_has_an_example).
EXTRA_EXAMPLES = {"lmstitch": LMStitchSpec(a="zoo:gpt-pydoc-s0-adamw", b="zoo:gpt-pydoc-s1-adamw", cut_a=1)}


def _builtin_kinds() -> list[str]:
    """Kinds stitchcore registers (other test modules may register their own test kinds)."""
    return [k for k in list_experiments() if get_experiment(k).run.__module__.startswith("stitchcore.")]


KINDS = _builtin_kinds()


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> dict[str, RunRecord]:
    """kind -> one stored run of that kind: the v1 fixture's runs (read from a copy), then the extra examples."""
    copy = tmp_path_factory.mktemp("specs") / "store"
    copy_store(FIXTURE, copy)
    with Store(copy) as store:
        records = {rec.kind: rec for rec in store.list_runs()}
    template = next(iter(records.values()))
    for kind, spec in EXTRA_EXAMPLES.items():
        records.setdefault(kind, replace(template, id=run_id_for(kind, spec.to_dict()), kind=kind,
                                          spec=spec.to_dict(), label=spec.label()))  # fmt: skip
    return records


def test_the_package_registers_its_kinds_on_import():
    assert {"zoo", "stitch", "matrix", "similarity", "sweep", "merge", "lmstitch", "lmdepth"} <= set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_a_from_dict(kind):
    exp = get_experiment(kind)
    assert exp.kind == kind and callable(exp.from_dict) and callable(exp.run)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_an_example(kind, stored):
    assert kind in stored, f"add an example {kind} spec to EXTRA_EXAMPLES (the v1 fixture has no {kind} run)"


@pytest.mark.parametrize("kind", KINDS)
def test_spec_from_record_round_trips_and_keeps_the_run_id(kind, stored):
    rec = stored[kind]
    spec = spec_from_record(rec)
    assert spec.to_dict() == rec.spec  # the stored dict, exactly: the run id hashes it
    assert run_id_for(kind, spec.to_dict()) == rec.id
    again = get_experiment(kind).from_dict(spec.to_dict())
    assert again == spec and run_id_for(kind, again.to_dict()) == rec.id
    assert callable(getattr(spec, "label", None)) and spec.label()


def test_unknown_kind_names_the_close_ones(stored):
    rec = replace(stored["stitch"], kind="stich")
    with pytest.raises(StitchError, match=rf"run {rec.id}: unknown experiment kind 'stich'; did you mean 'stitch'"):
        spec_from_record(rec)
    with pytest.raises(StitchError, match="did you mean 'sweep'"):
        get_experiment("swep")


def test_a_stored_spec_its_kind_cannot_read_names_the_run(stored):
    rec = stored["matrix"]
    bad = replace(rec, spec={**rec.spec, "epochz": 3})
    with pytest.raises(StitchError, match=rf"run {rec.id} \(matrix\): unknown MatrixSpec field"):
        spec_from_record(bad)


def test_registering_a_kind_twice_raises():
    with pytest.raises(ValueError, match="already registered"):
        register_experiment("stitch", StitchSpec.from_dict)(lambda spec, ctx: {})
    assert get_experiment("stitch").run.__module__ == "stitchcore.experiments.stitch"  # the first one stays
