"""What the Traits page reads from a preset's link and writes into one (stitchcore.experiments.trait_presets.links):
every preset's link reads back as the preset shown; each bad value is held with a note that quotes it on one short
line; each adapter recipe of the own-sweep form is found again in a sweep it made."""

from __future__ import annotations

import pytest

from stitchcore.experiments.preset_seeds import MAX_SEEDS, seeded_preset
from stitchcore.experiments.sweep import SweepSpec
from stitchcore.experiments.trait_presets import PROTOCOLS, SCALES, get_preset, list_presets, preset_scales
from stitchcore.experiments.trait_presets.links import (
    SWEEP_ADAPTERS,
    adapter_choice,
    preset_jobs,
    preset_link,
    read_preset_link,
    shown_preset,
)
from stitchcore.params import form_values

A, B = "zoo:cnn-digits-s0", "zoo:cnn-digits-s1"


@pytest.mark.parametrize("name", [p.name for p in list_presets()])
def test_every_preset_link_reads_back_as_the_preset_shown(name):
    protocols = PROTOCOLS if get_preset(name).protocol else ("task",)
    for protocol in protocols:
        for scale in SCALES:
            for seeds in (1, MAX_SEEDS):
                preset, note = shown_preset(name, protocol, scale)
                assert (note is None) == (scale in preset_scales(name))
                link = read_preset_link(preset_link(preset, seeds))
                assert link.notes == [] and link.seeds == seeds
                assert shown_preset(name, link.protocol, link.scale) == (preset, None)


@pytest.mark.parametrize(("params", "says"), [
    ({"seeds": "0"}, "seeds='0': model seeds are 1 to 5"),
    ({"seeds": "²"}, "seeds='²'"),
    ({"seeds": "-1"}, "seeds='-1'"),
    ({"seeds": "9" * 5000}, "(5,000 characters)"),
    ({"data": "cifar"}, "data='cifar': presets run on digits, mnist5k; showing digits."),
    ({"protocol": "MATCH"}, "protocol='MATCH': presets stitch by task or match; showing task."),
    ({"data": "a\nb"}, "data='a\\nb'"),
])  # fmt: skip
def test_a_bad_value_is_held_with_one_short_note(params, says):
    link = read_preset_link(params)
    assert (link.protocol, link.scale, link.seeds) == ("task", "digits", 1)
    (note,) = link.notes
    assert says in note and "\n" not in note and len(note) < 200


def test_preset_jobs_are_every_seeds_models_then_every_seeds_sweeps():
    preset = get_preset("coarse-labels", dataset="mnist5k")
    seeded = [seeded_preset(preset.name, k, None, "mnist5k") for k in range(2)]
    assert preset_jobs(preset, 2) == ([("zoo", r) for p in seeded for r in p.recipes]
                                      + [("sweep", s) for p in seeded for s in p.sweeps])  # fmt: skip
    assert preset_jobs(preset, 1) == [*(("zoo", r) for r in preset.recipes), *(("sweep", s) for s in preset.sweeps)]


@pytest.mark.parametrize("label", list(SWEEP_ADAPTERS))
def test_each_adapter_recipe_is_found_in_a_sweep_it_made(label):
    adapter, epochs = SWEEP_ADAPTERS[label]
    assert adapter_choice(form_values("sweep", SweepSpec(A, B, adapter=adapter, epochs=epochs))) == label


def test_a_sweep_of_no_recipe_finds_none():
    spec = SweepSpec(A, B, epochs=3)  # the task-trained recipe's adapter, but 3 epochs
    assert adapter_choice(form_values("sweep", spec)) is None
