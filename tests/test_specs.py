from dataclasses import replace
from pathlib import Path

import pytest

from stitchcore.errors import StitchError
from stitchcore.experiments import get_experiment, list_experiments, register_experiment, spec_from_record
from stitchcore.experiments.assemble import AssembleSpec
from stitchcore.experiments.lm import LMStitchSpec
from stitchcore.experiments.similarity import SimilaritySpec
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.transfer import TransferSpec
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


BAD_SPECS = [  # (build, what the message says): every spec refuses bad numbers in its constructor
    (lambda: ZooRecipe(lr=-1), r"^lr must be > 0 \(got -1\); typical values 1e-3 \.\. 1e-1"),
    (lambda: ZooRecipe(lr=0.0), r"^lr must be > 0"),
    (lambda: ZooRecipe(lr=float("nan")), r"^lr must be a finite number \(got nan\)"),
    (lambda: ZooRecipe(weight_decay=-1), r"^weight_decay \(--weight-decay\) must be at least 0"),
    (lambda: ZooRecipe(image_size=0), r"^image_size \(--image-size\) must be at least 1 \(got 0\)"),
    (lambda: ZooRecipe(l1=-5), r"^l1 must be at least 0 \(got -5\); 0 turns the penalty off"),
    (lambda: ZooRecipe(epochs=0), r"^epochs must be at least 1"),
    (lambda: ZooRecipe(seed=-1), r"^seed must be at least 0"),
    (lambda: ZooRecipe(momentum=1.0), r"^momentum must be below 1"),
    (lambda: ZooRecipe(prune_fraction=1.0), r"prune_fraction \(--prune-fraction\) must be below 1"),
    (lambda: ZooRecipe(finetune_layer="fc1", finetune_lr=0.0), r"^finetune_lr .*must be > 0"),
    (lambda: StitchSpec("zoo:a", "zoo:b", "fc1", "fc1", lr=-1), r"^lr must be > 0 \(got -1\)"),
    (lambda: StitchSpec("zoo:a", "zoo:b", "fc1", "fc1", weight_decay=-1), r"--weight-decay\) must be at least 0"),
    (lambda: StitchSpec("zoo:a", "zoo:b", "fc1", "fc1", kd_temperature=0), r"^kd_temperature .*must be > 0"),
    (lambda: StitchSpec("zoo:a", "zoo:b", "fc1", "fc1", batch_size=0), r"--batch-size\) must be at least 1"),
    (lambda: StitchSpec("zoo:a", "zoo:b", "fc1", "fc1", max_train=0), r"--max-train\) must be at least 2 images"),
    (lambda: StitchSpec("zoo:a", "zoo:b", "fc1", "fc1", max_test=1), r"--max-test\) must be at least 2 images"),
    (lambda: SimilaritySpec("zoo:a", "zoo:b", max_samples=0), r"--max-samples\) must be at least 4 \(got 0\)"),
    (lambda: SimilaritySpec("zoo:a", "zoo:b", split="val"), r"unknown split 'val'; use one of: train, test"),
    (lambda: SimilaritySpec("zoo:a", "zoo:b", token_mode="max"), r"unknown token_mode 'max'"),
]


@pytest.mark.parametrize("case", range(len(BAD_SPECS)))
def test_specs_refuse_bad_numbers_naming_the_field(case):
    build, message = BAD_SPECS[case]
    with pytest.raises(StitchError, match=message):
        build()


def test_the_defaults_pass_and_keep_their_dicts():
    """Validation changes no default: the stored spec dicts (and so run ids) stay as they were."""
    assert ZooRecipe().to_dict()["lr"] is None and ZooRecipe().to_dict()["image_size"] is None
    spec = StitchSpec("zoo:a", "zoo:b", "fc1", "fc1")
    assert (spec.lr, spec.weight_decay, spec.epochs, spec.batch_size, spec.max_train) == (1e-2, 0.05, 10, 64, None)
    assert SimilaritySpec("zoo:a", "zoo:b").max_samples is None


def test_a_zoo_recipe_its_data_cannot_train_is_refused_before_a_row(tmp_path):
    from stitchcore.experiments import check_spec, run_experiment

    store = Store(tmp_path / "store")
    for recipe, message in [
        (ZooRecipe(drop_class=10), r"drop_class \(--drop-class\) 10 is not a class of digits; use 0\.\.9"),
        (ZooRecipe(relabel=(3, 99)), r"relabel 99 is not a class of digits"),
        (ZooRecipe(arch="cnm"), r"did you mean 'cnn'"),
        (ZooRecipe(image_size=2), r"image_size 2 is too small"),
        (ZooRecipe(arch="mlp", finetune_layer="fc9"), r"finetune_layer 'fc9' is not a layer"),
    ]:
        with pytest.raises(StitchError, match=message):
            check_spec("zoo", recipe, store)
        with pytest.raises(StitchError, match=message):
            run_experiment("zoo", recipe, store)
    assert store.list_runs() == []
    store.close()


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
    """The default adapter starts from least squares, and the CLI's flags left out take the spec's defaults
    (another adapter flag keeps the least-squares start: the nested default is completed, not replaced)."""
    from stitchcore.cli._spec_args import spec_values
    from stitchcore.cli.main import build_parser
    from stitchcore.params import build_spec

    assert StitchSpec(a="zoo:a", b="zoo:b", cut_a="fc1", cut_b="fc1").adapter.init == "lstsq"
    for extra in ([], ["--norm", "none"]):
        args = build_parser().parse_args(["stitch", "--a", "zoo:a", "--b", "zoo:b", "--cut-a", "fc1", "--cut-b", "fc1",
                                          *extra])  # fmt: skip
        assert build_spec("stitch", spec_values(args, "stitch")).adapter.init == "lstsq"


# -- contract tests over the experiment registry (every registered kind, none listed by hand) ----------------------

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "store_v1"  # one run of every kind, by the old code
# Kinds the v1 fixture has no run of: an example spec each (a new kind fails test_every_kind_has_an_example).
EXTRA_EXAMPLES = {"lmstitch": LMStitchSpec(a="zoo:gpt-pydoc-s0-adamw", b="zoo:gpt-pydoc-s1-adamw", cut_a=1),
                  "assemble": AssembleSpec(a="zoo:cnn-digits-s0", b="zoo:vit-digits-s0-adamw-ffda8d",
                                           senders=("block2",), kinds=("linear", "bottleneck")),
                  "transfer": TransferSpec(a="zoo:cnn-digits-s0", b="zoo:cnn-digits-s1", cut_a="fc1", cut_b="fc1")}


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
    assert {"zoo", "stitch", "matrix", "similarity", "sweep", "merge", "lmstitch", "lmdepth", "assemble"} <= set(KINDS)


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
