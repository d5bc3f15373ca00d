"""Issue 25, item 2 (the Oxford report's traits): the random-init control's twins, the report's simplicity
definitions with the adapter counted, fine-tuning from one start, the presets' protocol, and stored specs
that keep their ids.  Each test fails on the code before the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from stitchcore.errors import StitchError
from stitchcore.experiments import run_experiment, spec_from_record
from stitchcore.experiments.matrix import run as matrix_run
from stitchcore.experiments.matrix.spec import MatrixSpec
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.sweep import SweepSpec
from stitchcore.experiments.trait_presets import L1_PRUNE, L2, TASK_EPOCHS, get_preset, zoo_ref
from stitchcore.experiments.zoo import ZooRecipe, check_zoo
from stitchcore.measures.simplicity import REPORT_KEYS, gzip_bits, report_simplicity
from stitchcore.models.info import weights_fingerprint
from stitchcore.models.refs import random_twin, random_twins
from stitchcore.models.sources import load_model
from stitchcore.store.results import Store, run_id_for
from tests.conftest import copy_store

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "store_v1"
TINY = {"positions": ("fc2",), "epochs": 1, "max_train": 200, "max_test": 100}  # one position, seconds


def _fingerprints(pair, store) -> list[str]:
    return [weights_fingerprint(load_model(r, store=store).model) for r in pair]


def test_twin_seeds_differ_in_the_sweep_control(trained_store):
    store, (ref0, ref1) = trained_store  # two CNNs of one architecture: their twins were one network
    s = run_experiment("sweep", SweepSpec(ref0, ref1, control_seeds=2, simplicity=False, **TINY), store).record.summary
    pairs = s["control_refs"]
    assert len(pairs) == 2 and len({r for p in pairs for r in p}) == 4  # four seeds, none shared
    for pair in pairs:
        fa, fb = _fingerprints(pair, store)
        assert fa != fb, pair
    shared = random_twins(ref0, ref1, 0, rule="shared")  # the old rule, kept for stored runs
    assert len(set(_fingerprints(shared, store))) == 1


def test_twin_seeds_differ_in_the_matrix_both_random_control(trained_store, monkeypatch):
    store, (ref0, ref1) = trained_store
    loaded = []
    real = matrix_run.load_model

    def spy(ref, **kw):
        loaded.append(str(ref))
        return real(ref, **kw)

    monkeypatch.setattr(matrix_run, "load_model", spy)
    spec = MatrixSpec(ref0, ref1, senders=("fc2",), receivers=("fc2",), controls=True, max_train=100, max_test=50)
    assert spec.to_dict()["twin_seeds"] == "distinct"
    run_experiment("matrix", spec, store)
    twins = [r for r in loaded if "init=random" in r]
    assert len(twins) == 2 and len(set(_fingerprints(twins, store))) == 2


def test_stored_specs_keep_their_ids_and_read_the_old_behaviour(tmp_path):
    copy_store(FIXTURE, tmp_path / "store")
    with Store(tmp_path / "store") as store:
        records = {rec.kind: rec for rec in store.list_runs() if rec.kind in ("sweep", "matrix", "zoo")}
    for kind, rec in records.items():
        spec = spec_from_record(rec)
        assert run_id_for(kind, spec.to_dict()) == rec.id, kind
    assert spec_from_record(records["sweep"]).twin_seeds == "shared"
    assert not spec_from_record(records["sweep"]).simplicity_adapter
    assert spec_from_record(records["matrix"]).twin_seeds == "shared"
    assert spec_from_record(records["zoo"]).start is None
    old = SweepSpec("zoo:a", "zoo:b", twin_seeds="shared", simplicity_adapter=False, simplicity_report=False)
    assert not {"twin_seeds", "simplicity_adapter", "simplicity_report"} & set(old.to_dict())  # the old dict
    assert SweepSpec("zoo:a", "zoo:b").to_dict()["twin_seeds"] == "distinct"  # new runs write their rule


def test_report_simplicity_definitions_on_a_small_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3)).eval()
    batches = [(torch.randn(16, 4), torch.randint(0, 3, (16,))) for _ in range(3)]
    out = report_simplicity(model, batches, sigma=1e-3, seed=0)
    by_hand = []
    for x, y in batches:  # per-batch gradient over every parameter, BatchNorm's included
        grads = torch.autograd.grad(nn.functional.cross_entropy(model(x), y), list(model.parameters()))
        by_hand.append(float(torch.sqrt(sum((g**2).sum() for g in grads))))
    assert out["grad_norm_batch"] == pytest.approx(sum(by_hand) / 3, rel=1e-5)
    assert out["gzip_bits_all"] == gzip_bits(model)["gzip_bits"] and out["report_batches"] == 3
    assert report_simplicity(model, batches, sigma=0.0)["sharpness_abs"] == 0.0
    assert abs(out["sharpness_abs"]) < 1e-3  # an absolute 1e-3 perturbation barely moves the loss
    assert all(p.requires_grad for p in model.parameters())  # left as found


def test_sweep_simplicity_counts_the_adapter_and_gives_the_report_s_measures(trained_store):
    store, (ref0, ref1) = trained_store
    new = run_experiment("sweep", SweepSpec(ref0, ref1, control=False, **TINY), store).record.summary
    old = run_experiment("sweep", SweepSpec(ref0, ref1, control=False, simplicity_adapter=False,
                                            simplicity_report=False, **TINY), store).record.summary  # fmt: skip
    adapter_bits = new["simplicity"]["gzip_bits"][0] - old["simplicity"]["gzip_bits"][0]
    assert adapter_bits > 0  # the adapter's weights are measured now
    assert set(REPORT_KEYS) <= set(new["simplicity"]) and not set(REPORT_KEYS) & set(old["simplicity"])
    assert set(REPORT_KEYS) <= set(new["reference"]["a"]["simplicity"])
    assert "adapter's" in new["simplicity_definition"]["weights"] and "sharpness_abs" in new["simplicity_definition"]
    assert len(new["rows"][0]["train_loss"]) == 1 and new["rows"][0]["logit_gap"]["a"] > 0


def test_fine_tuning_starts_from_a_trained_model(trained_store):
    store, (ref0, _) = trained_store
    tuned = ZooRecipe(start=ref0, l2=1e-3, epochs=1, lr=1e-7)
    out = run_experiment("zoo", tuned, store)
    start, moved = load_model(ref0, store=store).model, load_model(out.record.summary["ref"], store=store).model
    gaps = [float((p - q).abs().max()) for p, q in zip(start.parameters(), moved.parameters(), strict=True)]
    assert max(gaps) < 1e-4  # one epoch at lr 1e-7: still the start's weights (a fresh init is far away)
    assert "start" in tuned.to_dict() and "start" not in ZooRecipe().to_dict()
    with pytest.raises(StitchError, match="zoo:, file: .*timm: or torchvision:"):
        ZooRecipe(start="hf:/some/dir?task=image-classification")


HUB_START = "timm:test_resnet?num_classes=10&pretrained=false"  # timm's own tiny ResNet, random init


def test_a_hub_model_is_fine_tuned_with_l1_pruning_and_with_l2_then_stitched(tmp_path):
    """The report's Fig. 6 setting from a hub start: one timm model fine-tuned twice (L1 + pruning, L2), each
    stored as a zoo model of the hub architecture that loads back (trained, random twin, as a file), then
    stitched; a torchvision model fine-tunes the same way."""
    store = Store(tmp_path / "store")
    tiny = {"start": HUB_START, "epochs": 2, "image_size": 16, "lr": 0.02}
    a = run_experiment("zoo", ZooRecipe(seed=1, **tiny, **{**L1_PRUNE, "prune_every": 1}), store).record.summary
    b = run_experiment("zoo", ZooRecipe(seed=2, **tiny, **L2), store).record.summary
    assert a["arch"] == b["arch"] == "timm:test_resnet" and a["input_shape"] == [3, 16, 16]
    assert a["sparsity"] > 0.3 and b["sparsity"] == 0.0 and min(a["accuracy"], b["accuracy"]) > 0.2
    start = load_model(HUB_START).model
    tuned = load_model(a["ref"], store=store)
    assert tuned.input_shape == (3, 16, 16) and tuned.meta["arch"] == "timm:test_resnet"
    assert weights_fingerprint(tuned.model) not in (weights_fingerprint(start), weights_fingerprint(
        load_model(random_twin(a["ref"], 0), store=store).model))
    blob = store.artifact_path(store.list_runs(kind="zoo")[-1].id, "model.safetensors")
    assert load_model(f"file:{blob}").meta["arch"] == "timm:test_resnet"  # the blob names its architecture
    stitch = run_experiment("stitch", StitchSpec(a["ref"], b["ref"], "layer1.0", "layer1.0", epochs=1, max_train=256,
                                                 max_test=256), store).record.summary  # fmt: skip
    assert stitch["accuracy"] is not None
    tv = run_experiment("zoo", ZooRecipe(start="torchvision:resnet18?num_classes=10&weights=none", epochs=1,
                                         image_size=16, batch_size=128), store).record.summary  # fmt: skip
    assert tv["arch"] == "torchvision:resnet18" and load_model(tv["ref"], store=store).num_classes == 10


def test_a_hub_start_that_cannot_be_fine_tuned_is_refused_before_it_runs():
    with pytest.raises(StitchError, match="1000 outputs .* add num_classes=10"):
        check_zoo(ZooRecipe(start="timm:test_resnet?pretrained=false"))
    with pytest.raises(StitchError, match="brings its own architecture"):
        ZooRecipe(arch="mlp", start=HUB_START)
    with pytest.raises(StitchError, match="does not run at image size 16"):
        check_zoo(ZooRecipe(start="timm:vit_tiny_patch16_224?num_classes=10&pretrained=false", image_size=16))


def test_oxford_presets_default_to_a_task_trained_stitch_and_keep_matching_as_an_option():
    for name in ("inheritance", "special-layer", "distributed", "simplicity"):
        task, match = get_preset(name), get_preset(name, protocol="match")
        assert task.protocol == "task" and task.sweeps[0].epochs >= TASK_EPOCHS
        assert match.protocol == "match" and all(s.epochs == 0 for s in match.sweeps)
    special = get_preset("special-layer")
    a_refs = {s.a for s in special.sweeps[:3]}
    assert a_refs == {zoo_ref(ZooRecipe(arch="mlp", seed=1))}  # separately trained, not B's own start
    assert "Sanity check" in special.sweep_titles[3] and special.sweeps[3].adapter.kind == "identity"
    fig6 = get_preset("simplicity")
    assert fig6.recipes[1].start == fig6.recipes[2].start == zoo_ref(fig6.recipes[0])
    with pytest.raises(StitchError, match="one protocol"):
        get_preset("connectivity", protocol="match")
