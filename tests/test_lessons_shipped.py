"""Each shipped lesson runs end to end on a CPU, and what its text tells the class to look for is what it shows.

Every step's own run is computed with ``run_lesson`` (its models first) on a copy of the session store (which
already holds the two digit CNNs the lessons share), then the outcome the lesson's text promises is checked on
the stored summaries.  Each of these outcomes could have come out otherwise (seeds, cuts, heads are real runs).
The same outcomes at model seeds no text was written on: ``tests/test_lessons_heldout.py``.
"""

from __future__ import annotations

import pytest
import torch

from stitchcore.experiments import run_experiment
from stitchcore.experiments.sweep import penalty_along
from stitchcore.lessons import get_lesson, lesson_progress, run_lesson, step_run
from stitchcore.experiments.trait_presets import get_preset, run_preset
from stitchcore.store.results import Store
from tests._shared_stores import presets
from tests.conftest import big_job_threads, copy_store


@pytest.fixture
def store(tmp_path, _trained):
    copy_store(_trained[2], tmp_path / "store")
    threads = torch.get_num_threads()
    torch.set_num_threads(big_job_threads())
    with Store(tmp_path / "store") as store:
        yield store
    torch.set_num_threads(threads)


def _summaries(name: str, store: Store) -> list[dict]:
    lesson = get_lesson(name)
    outcomes = run_lesson(lesson, store)
    assert lesson_progress(lesson, store) == ["done"] * len(lesson.steps)
    return [o.record.summary for o in outcomes]


def test_two_seeds_stitch_with_a_penalty_near_zero_along_depth(store):
    zoo, stitch, sweep = _summaries("two-seeds", store)
    assert zoo["ref"] == "zoo:cnn-digits-s0" and zoo["accuracy"] > 0.9
    assert abs(stitch["penalty"]) < 0.03  # B's accuracy minus the stitched one, at block2
    penalties = penalty_along(sweep)
    assert len(penalties) == len(sweep["positions"]) >= 4
    assert max(penalties) < 0.05, penalties  # near zero at every cut
    control = sweep["control"]["accuracy"]["mean"]  # untrained twins joined the same way
    assert all(c < s - 0.2 for c, s in zip(control, sweep["stitched"]["accuracy"], strict=True)), control


@pytest.fixture(scope="module")
def preset_store(tmp_path_factory, worker_id, _trained):
    with presets(tmp_path_factory, worker_id, _trained) as store:
        yield store


@pytest.fixture
def presets_run(tmp_path, preset_store):
    """A copy of the session's presets store once it holds the two preset sweeps where-a-trait-lives runs (sweep 1
    of inheritance and of special-layer, with their models): tests/test_sweep.py runs the same inheritance sweep,
    so the session computes it once, here or there."""
    threads = torch.get_num_threads()
    torch.set_num_threads(big_job_threads())
    try:
        for name in ("inheritance", "special-layer"):
            run_preset(name, preset_store, sweeps=[0])
    finally:
        torch.set_num_threads(threads)
    copy_store(preset_store.root, tmp_path / "presets")
    with Store(tmp_path / "presets") as store:
        yield store


@pytest.mark.timeout(600)  # the report's stitch trains 20 epochs at each of five cuts, with its control twins
def test_where_a_trait_lives_moves_with_the_cut(presets_run):
    """The lesson's own steps over the presets' runs: each step must find its run done (the same spec)."""
    store = presets_run
    lesson = get_lesson("where-a-trait-lives")
    assert [step_run(s).spec.to_dict() for s in lesson.steps[1:]] == [
        get_preset(name).sweeps[0].to_dict() for name in ("inheritance", "special-layer")]  # fmt: skip
    a, inheritance, special = _summaries("where-a-trait-lives", store)
    assert 0.8 < a["accuracy"] < 0.92  # every 3 called an 8: about a tenth of the test images wrong
    confusion = inheritance["stitched"]["confusion:3->8"]
    assert confusion[0] < 0.2 and confusion[-1] > 0.8, confusion  # B does the work early, A late
    positions, special_conf = special["positions"], special["stitched"]["confusion:3->8"]
    before = positions.index("fc1") - 1  # the cut before B's fine-tuned fc1: C has B's fc1
    after = special_conf[before + 1 :]  # from fc1 on: A's fc1 in C
    assert special_conf[before] > max(after) + 0.3, special_conf


def test_similar_is_not_the_same(store):
    cka, cka_random, matrix = _summaries("similar-is-not-the-same", store)
    cuts = cka["senders"]
    at = {name: i for i, name in enumerate(cuts)}
    values, acc = cka["values"], matrix["values"]
    # similar but not stitchable: A's block2 and B's block1
    assert values[at["block2"]][at["block1"]] > 0.75
    assert acc[at["block2"]][at["block1"]] < matrix["base"]["b"] - 0.2
    # less similar, yet stitched at B's accuracy: A's fc2 into B's fc2
    assert values[at["fc2"]][at["fc2"]] < values[at["block2"]][at["block1"]]
    assert values[at["fc2"]][at["fc2"]] < 0.8 and acc[at["fc2"]][at["fc2"]] > matrix["base"]["b"] - 0.03
    # an untrained network's first layer is as "similar" to A's as a trained one's
    assert cka_random["values"][0][0] > 0.85 and abs(cka_random["values"][0][0] - values[0][0]) < 0.05
    assert set(matrix["controls"]) >= {"random_sender", "random_receiver", "random_both"}


def test_heads_matter(store):
    _, _, merge_a, merge_b, stitch_b = _summaries("heads-matter", store)
    assert merge_a["penalty_base"] == "a" and merge_b["penalty_base"] == "b"
    assert merge_a["loss_penalty"] > merge_b["loss_penalty"] + 0.2  # no adapter: keep A's head
    lesson = get_lesson("heads-matter")
    own = step_run(lesson.step(5)).spec  # the setting the text says the flip needs: 300 steps from the fit
    assert (own.until, own.start, own.steps, own.adapter.init) == ("steps", "init", 300, "lstsq")
    variant = step_run(lesson.step(5), {"head": "a"})
    assert variant.changed == {"head": "a"}
    stitch_a = run_experiment(variant.kind, variant.spec, store).record.summary
    assert stitch_b["loss_penalty"] > stitch_a["loss_penalty"] + 0.05  # translated into B's stream: B's head
