"""Issue 42: the foundation-pair preset (Revisiting Stitching in the Foundation Model Era, CVPR 2026): DINOv2 into
CLIP with each tower's linear probe, the task, match and final objectives along depth and a random-init DINOv2
under the final one.  Its pretrained weights are not on a machine without the hub: it says so and runs nothing.
The machinery it stands on (a hub tower with a linear probe, a sweep between towers on the final objective) runs
here with random-init towers."""

from __future__ import annotations

import pytest

from stitchcore.errors import StitchError
from stitchcore.experiments import run_experiment
from stitchcore.experiments.sweep import SweepSpec
from stitchcore.experiments.trait_presets import (
    FOUNDATION_A,
    FOUNDATION_B,
    get_preset,
    missing_weights,
    run_preset,
    zoo_ref,
)
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.store.results import Store
from tests.conftest import run_cli


def test_the_preset_compares_the_three_objectives_along_depth_against_a_random_bottom():
    preset = get_preset("foundation-pair")
    assert preset.needs_weights == (FOUNDATION_A, FOUNDATION_B)
    assert [s.objective for s in preset.sweeps] == ["task", "match", "final", "final"]
    assert all(s.positions == preset.sweeps[0].positions and s.b == preset.sweeps[0].b for s in preset.sweeps)
    assert all(r.epochs == 0 and r.finetune_layer == "head" for r in preset.recipes)  # linear probes, towers kept
    assert preset.baselines == {2: (3,)} and "init=random" in preset.sweeps[3].a
    assert preset.sweeps[0].dataset == "digits" and preset.recipes[0].dataset == "digits"


def test_without_its_weights_it_says_what_to_do_and_runs_nothing(tmp_path, capsys):
    preset = get_preset("foundation-pair")
    missing = missing_weights(preset)
    if not missing:
        pytest.skip("this machine has the towers' pretrained weights")
    store = Store(tmp_path / "store")
    with pytest.raises(StitchError, match="not on this machine") as exc:
        run_preset("foundation-pair", store)
    assert f"timm:{missing[0]}" in str(exc.value) and "HF_HUB_CACHE" in str(exc.value)
    assert store.list_runs() == []
    code, _, err = run_cli(["sweep", "--preset", "foundation-pair"], store.root, capsys)  # the CLI says the same
    assert code == 2 and "not on this machine" in err and store.list_runs() == []


def test_a_linear_probe_of_a_hub_tower_and_a_final_objective_sweep_between_two_towers(tmp_path):
    store = Store(tmp_path / "store")
    towers = [ZooRecipe(start=f"timm:test_vit?pretrained=false&num_classes=10&img_size=32&seed={s}", epochs=0,
                        finetune_layer="head", finetune_epochs=3, seed=s) for s in (0, 1)]  # timm's tiny ViT
    with pytest.raises(StitchError, match="0 only for a hub start"):
        ZooRecipe(epochs=0)  # a zoo network from scratch trains at least one epoch
    summaries = [run_experiment("zoo", r, store).record.summary for r in towers]
    assert all(s["accuracy"] > 0.3 for s in summaries)  # the head alone learns from a random tower's features
    sweep = SweepSpec(zoo_ref(towers[0]), zoo_ref(towers[1]), positions=("blocks.3",), objective="final", epochs=1,
                      max_train=128, max_test=64, control=False, simplicity=False, noise_control=False)  # fmt: skip
    out = run_experiment("sweep", sweep, store).record.summary
    assert out["positions"] == ["blocks.3"] and 0.0 <= out["stitched"]["accuracy"][0] <= 1.0
