import pytest

from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.errors import StitchError
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.stitching.train import parse_objective
from stitchcore.store.results import run_id_for


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
    other = StitchSpec(a="zoo:a", b="zoo:b", cut_a="fc1", cut_b="fc1", adapter=AdapterSpec(init="lstsq"))
    assert run_id_for("stitch", s.to_dict()) != run_id_for("stitch", other.to_dict())
