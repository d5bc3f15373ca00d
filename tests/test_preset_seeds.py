"""A preset over several model seeds: each seed's models and adapters are its own, seed 0 is the page's preset,
and each cut's number is read across the finished seeds with a Student-t interval (checked against scipy)."""

from __future__ import annotations

import pytest
from scipy import stats

from stitchcore.errors import StitchError
from stitchcore.experiments.preset_seeds import MAX_SEEDS, across_model_seeds, model_seeds, seeded_preset
from stitchcore.experiments.trait_presets import get_preset
from stitchcore.store.results import Store, run_id_for

POSITIONS = ["block1", "block2", "flatten", "fc1", "fc2"]


def test_each_seed_trains_its_own_models_and_adapters():
    presets = [seeded_preset("connectivity", k) for k in range(3)]
    assert presets[0] == get_preset("connectivity")  # seed 0: the stored runs of the page's preset
    refs = [{r for s in p.sweeps for r in (s.a, s.b)} for p in presets]
    assert not refs[0] & refs[1] and not refs[1] & refs[2] and not refs[0] & refs[2]  # no model shared
    assert [p.sweeps[0].seed for p in presets] == [0, 1, 2]
    ids = [{run_id_for("sweep", s.to_dict()) for s in p.sweeps} for p in presets]
    assert len(ids[0] | ids[1] | ids[2]) == 3 * len(presets[0].sweeps)
    with pytest.raises(StitchError, match="model seeds must be 1 to"):
        model_seeds(MAX_SEEDS + 1)


def _store_sweep(store: Store, spec, stitched: list[float], b_accuracy: float) -> None:
    run_id = run_id_for("sweep", spec.to_dict())
    store.begin(run_id, "sweep", spec.to_dict())
    store.finish(run_id, {"positions": POSITIONS, "metrics": ["accuracy"], "stitched": {"accuracy": stitched},
                          "reference": {"b": {"metrics": {"accuracy": b_accuracy}}}})  # fmt: skip


def test_a_cut_reads_as_mean_and_t_interval_over_the_finished_seeds(tmp_path):
    store = Store(tmp_path / "store")
    accuracies = ([0.90, 0.92, 0.95, 0.96, 0.97], [0.88, 0.93, 0.94, 0.95, 0.97], [0.91, 0.90, 0.96, 0.97, 0.95])
    for k, acc in enumerate(accuracies):  # the first sweep (seed 1 -> seed 0 and its twins) of each seed
        _store_sweep(store, seeded_preset("connectivity", k).sweeps[0], acc, 0.97)
    first, *rest = across_model_seeds("connectivity", store, 4)
    assert first["seeds"] == [0, 10, 20, 30] and first["done"] == [0, 10, 20] and first["positions"] == POSITIONS
    cell = first["metrics"]["accuracy"][0]
    assert cell["values"] == [0.90, 0.88, 0.91, None]  # the fourth seed has not run
    lo, hi = stats.t.interval(0.95, 2, loc=0.896667, scale=stats.sem([0.90, 0.88, 0.91]))
    assert cell["mean"] == pytest.approx(0.896667, abs=1e-6) and cell["ci"] == pytest.approx([lo, hi], abs=1e-5)
    penalty = first["penalty"][0]  # B's accuracy − stitched, seed by seed, then across
    assert penalty["values"] == pytest.approx([0.07, 0.09, 0.06, None]) and penalty["ci"][0] < 0.07 < penalty["ci"][1]
    assert all(s["done"] == [] and s["positions"] == [] and s["penalty"] == [] for s in rest)  # none run yet
    one = across_model_seeds("connectivity", store, 1)[0]["metrics"]["accuracy"][0]
    assert one == {"values": [0.90], "mean": 0.9, "ci": None}  # one seed: no spread to estimate
