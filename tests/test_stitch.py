"""End-to-end stitching on the bundled digits data: real training, real store."""

from __future__ import annotations

import dataclasses
import threading

import pytest
import torch

from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.errors import AdapterError, Cancelled, CutError, RefError
from stitchcore.experiments import run_experiment
from stitchcore.store import run_id_for
from stitchcore.experiments.stitch import StitchSpec


def _spec(refs, cut_a, cut_b, **kw):
    return StitchSpec(a=refs[0], b=refs[1], cut_a=cut_a, cut_b=cut_b, **kw)


def test_zoo_models_train_well_and_resolve(trained_store):
    from stitchcore.models.sources import load_model

    store, refs = trained_store
    assert refs == ["zoo:cnn-digits-s0", "zoo:cnn-digits-s1"]
    for ref in refs:
        m = load_model(ref, store=store)
        assert m.dataset == "digits" and m.num_classes == 10
        assert m.meta["accuracy"] > 0.9
        assert not m.model.training


def test_zoo_recipe_is_never_trained_twice(trained_store):
    from stitchcore.experiments.zoo import ZooRecipe
    store, _ = trained_store
    out = run_experiment("zoo", ZooRecipe(seed=0), store)
    assert out.cached


def test_unknown_zoo_ref_says_how_to_train(trained_store):
    from stitchcore.models.sources import load_model

    store, _ = trained_store
    with pytest.raises(RefError, match="zoo train --arch cnn --dataset digits --seed 7"):
        load_model("zoo:cnn-digits-s7", store=store)


def test_differently_seeded_cnns_stitch_with_small_penalty(trained_store, monkeypatch):
    from stitchcore.experiments import _registry

    store, refs = trained_store
    spec = _spec(refs, "block1", "block1", adapter=AdapterSpec(init="lstsq"), epochs=2)
    out = run_experiment("stitch", spec, store)
    s = out.record.summary
    assert not out.cached
    assert s["base"]["b"] > 0.9
    assert s["penalty"] < 0.05, s  # Bansal et al.: stitching connectivity
    assert 0 <= s["lstsq_residual"] < 1
    assert s["params"] > 0 and s["flops"] > 0
    assert len(s["per_class"]) == 10
    assert store.series(out.record.id)["loss"], "loss curve stored"

    def never(*_a, **_k):
        raise AssertionError("a stored run is checked or run again")

    real = _registry.get_experiment  # a stored run opens at once: the store is read, nothing is checked or run
    monkeypatch.setattr(_registry, "get_experiment",
                        lambda kind: dataclasses.replace(real(kind), run=never, check=never))
    again = run_experiment("stitch", spec, store)
    assert again.cached and again.record.summary == s


def test_random_init_bottom_is_worse_than_trained(trained_store):
    """A random-weights A at a late cut cannot feed B as well as a trained A."""
    store, refs = trained_store
    kw = dict(adapter=AdapterSpec(init="lstsq"), epochs=1)
    trained = run_experiment("stitch", _spec(refs, "fc2", "fc2", **kw), store).record.summary
    rand = run_experiment(
        "stitch", _spec([refs[0] + "?init=random&seed=5", refs[1]], "fc2", "fc2", **kw), store
    ).record.summary
    assert rand["accuracy"] < trained["accuracy"] - 0.1, (rand["accuracy"], trained["accuracy"])


def test_bad_cut_and_incompatible_pair(trained_store):
    """Input its models cannot run is refused before any row is written: nothing clutters the store."""
    store, refs = trained_store
    bad_cut, incompatible = _spec(refs, "blok2", "block2"), _spec(refs, "fc2", "block1", epochs=1)
    with pytest.raises(CutError, match="block"):
        run_experiment("stitch", bad_cut, store)
    with pytest.raises(AdapterError):
        run_experiment("stitch", incompatible, store)
    assert store.lookup(run_id_for("stitch", bad_cut.to_dict())) is None
    assert store.lookup(run_id_for("stitch", incompatible.to_dict())) is None


def test_cancel_marks_run_cancelled(trained_store):
    store, refs = trained_store
    cancel = threading.Event()
    seen = []

    def progress(frac, msg, metrics):
        seen.append(frac)
        if "loss" in metrics:
            cancel.set()

    spec = _spec(refs, "block1", "block1", epochs=4, seed=11)
    with pytest.raises(Cancelled):
        run_experiment("stitch", spec, store, progress=progress, cancel=cancel)
    from stitchcore.store.results import run_id_for

    assert store.lookup(run_id_for("stitch", spec.to_dict())).status == "cancelled"


def test_frozen_parts_are_bit_identical_after_adapter_training():
    """BatchNorm statistics and weights of A and B never move while the adapter trains."""
    from stitchcore.stitching.adapters import build_adapter
    from stitchcore.models.archs import create_arch
    from stitchcore.cuts import get_cut, split
    from stitchcore.stitching.train import AdapterTargets, TrainKnobs, train_adapter

    torch.manual_seed(0)
    model = create_arch("resnet", blocks=(1, 1, 1, 1), width=8, in_chans=1, num_classes=10)
    model.eval()
    x = torch.randn(64, 1, 8, 8)
    cut = get_cut(model, "layer2.0", x[:2])
    prefix, suffix = split(model, cut, x[:2])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        h = prefix(x)
    adapter = build_adapter(AdapterSpec(), cut, cut)
    train_adapter(
        adapter, suffix, h, AdapterTargets(labels=torch.randint(0, 10, (64,)), receiver=h),
        objective={"task": 1.0, "match": 1.0}, knobs=TrainKnobs("adamw", 1e-2, 0.05, epochs=2, batch_size=16, seed=0),
        device=torch.device("cpu"),
    )
    after = model.state_dict()
    for k, v in before.items():
        assert torch.equal(v, after[k]), k
    assert not suffix.training


def test_head_preserving_stitch_uses_a_head(trained_store):
    """C = A_head(B_middle(S(A_bottom))): scored against A, whose head it uses.

    With B = A the lstsq adapter is the identity map, so C must reproduce A.
    """
    store, refs = trained_store
    same = [refs[0], refs[0]]
    spec = _spec(same, "block1", "block1", adapter=AdapterSpec(init="lstsq"), epochs=0, head="a", head_cut="fc2")
    s = run_experiment("stitch", spec, store).record.summary
    assert s["penalty_base"] == "a"
    assert s["penalty"] == pytest.approx(s["base"]["a"] - s["accuracy"], abs=1e-6)
    assert abs(s["penalty"]) < 0.01, s
    other = _spec(refs, "block1", "block1", adapter=AdapterSpec(init="lstsq"), epochs=0, head="a", head_cut="fc2")
    mixed = run_experiment("stitch", other, store).record.summary
    assert mixed["penalty_base"] == "a" and mixed["accuracy"] < s["accuracy"]


def test_segment_between_cuts_composes_exactly():
    from stitchcore.models.archs import create_arch
    from stitchcore.cuts import split, split_segment

    torch.manual_seed(0)
    model = create_arch("resnet", blocks=(1, 1, 1, 1), width=8, in_chans=1, num_classes=10).eval()
    x = torch.randn(4, 1, 8, 8)
    prefix, _ = split(model, "layer1.0", x[:2])
    _, tail = split(model, "layer3.0", x[:2])
    middle = split_segment(model, "layer1.0", "layer3.0", x[:2])
    with torch.no_grad():
        assert torch.allclose(tail(middle(prefix(x))), model(x), atol=1e-5)
    with pytest.raises(CutError, match="does not come after"):
        split_segment(model, "layer3.0", "layer1.0", x[:2])


@pytest.mark.parametrize("objective", ["match", "kd", "task+0.5*kd"])
def test_other_objectives_train(trained_store, objective):
    store, refs = trained_store
    spec = _spec(refs, "fc1", "fc1", objective=objective, epochs=2, max_train=512)
    s = run_experiment("stitch", spec, store).record.summary
    assert s["accuracy"] > 0.5, s["accuracy"]
    assert s["n_train"] == 512


def test_nan_loss_stops_with_clear_message():
    from stitchcore.errors import TrainingError
    from stitchcore.stitching.train import AdapterTargets, TrainKnobs, train_adapter

    h = torch.randn(32, 8)
    h[3, 0] = float("nan")
    adapter = torch.nn.Linear(8, 8)
    with pytest.raises(TrainingError, match="diverged"):
        train_adapter(
            adapter, torch.nn.Linear(8, 3), h, AdapterTargets(labels=torch.zeros(32, dtype=torch.long)),
            objective={"task": 1.0}, knobs=TrainKnobs("adamw", 1e-3, 0.0, epochs=1, batch_size=32, seed=0),
            device=torch.device("cpu"),
        )


def test_language_model_recipe_is_refused_clearly(trained_store):
    from stitchcore.errors import StitchError
    from stitchcore.experiments.zoo import ZooRecipe

    store, _ = trained_store
    with pytest.raises(StitchError, match="language model"):
        run_experiment("zoo", ZooRecipe(arch="gpt"), store)


def test_zoo_recipe_with_traits_and_pruning(trained_store):
    from stitchcore.experiments.zoo import ZooRecipe

    store, _ = trained_store
    s = run_experiment(
        "zoo", ZooRecipe(seed=3, epochs=6, drop_class=4, l1=1e-5, prune_every=2, prune_fraction=0.3), store
    ).record.summary
    assert s["per_class"][4] < 0.2, "class never seen in training is not recognised"
    assert 0.4 < s["sparsity"] < 0.7  # two pruning steps of 30%: 1 - 0.7**2 = 0.51
    assert s["name"].startswith("cnn-digits-s3-")
