"""Random weights are seeded by the ref: the same ref gives bit-identical weights in every process, another
seed other weights, and loading leaves the caller's torch RNG alone.

Two servers once showed 10.5% and 12.0% for the same run id on ``timm:...?pretrained=false``: each process
drew its own weights from wherever its global RNG happened to be.  The child processes here disturb their
global RNG differently before loading, as two servers that did different work would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from stitchcore.errors import RefError
from stitchcore.models.archs import create_arch
from stitchcore.models.info import describe_model, weights_fingerprint
from stitchcore.models.refs import parse_ref, random_twin
from stitchcore.models.sources import load_model

ROOT = Path(__file__).resolve().parents[1]
TIMM = "timm:resnet18?pretrained=false&num_classes=10"
TV = "torchvision:resnet18?weights=none&num_classes=10"

# A child process: disturb the global RNG by `noise` draws, load each ref, save its state dict, report whether
# the global RNG state moved and the fingerprint the Models page shows.
CHILD = r"""
import json, sys
import torch
from safetensors.torch import save_file
from stitchcore.models.info import weights_fingerprint
from stitchcore.models.sources import load_model

noise, out, refs = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
torch.manual_seed(noise)
torch.rand(noise * 1000)
report = {}
for i, ref in enumerate(refs):
    before = torch.random.get_rng_state()
    model = load_model(ref).model
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, f"{out}/{i}.safetensors")
    report[ref] = {"rng_untouched": torch.equal(before, torch.random.get_rng_state()),
                   "fingerprint": weights_fingerprint(model)}
print(json.dumps(report))
"""


def _child(tmp_path: Path, noise: int, refs: list[str]) -> tuple[dict, list[dict[str, torch.Tensor]]]:
    out = tmp_path / f"child{noise}"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "STITCHLAB_OFFLINE": "1",
           "PYTHONHASHSEED": str(noise)}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", CHILD, str(noise), str(out), *refs], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report, [load_file(out / f"{i}.safetensors") for i in range(len(refs))]


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)


def test_two_processes_build_the_same_random_weights_and_another_seed_others(tmp_path):
    refs = [TIMM, TV, TIMM + "&seed=1", TV + "&seed=1"]
    report_1, weights_1 = _child(tmp_path, 1, refs)
    report_2, weights_2 = _child(tmp_path, 2, refs)
    for ref, a, b in zip(refs, weights_1, weights_2):
        assert _same(a, b), f"{ref}: two processes drew different weights"
        assert report_1[ref]["fingerprint"] == report_2[ref]["fingerprint"]
        assert report_1[ref]["rng_untouched"] and report_2[ref]["rng_untouched"]
    for seed0, seed1 in ((0, 2), (1, 3)):  # seed=1 is another draw, of the same shapes
        a, b = weights_1[seed0], weights_1[seed1]
        assert a.keys() == b.keys() and not torch.equal(a["conv1.weight"], b["conv1.weight"])
        assert report_1[refs[seed0]]["fingerprint"] != report_1[refs[seed1]]["fingerprint"]
    # and this process (another RNG history again) draws them too: the fingerprint is of those very weights
    assert weights_fingerprint(load_model(TIMM).model) == report_1[TIMM]["fingerprint"]


@pytest.mark.parametrize("ref", [TIMM, TV, "zoo"])
def test_loading_leaves_the_callers_rng_alone(ref, trained_store):
    store, refs = trained_store
    ref = random_twin(refs[0], 4) if ref == "zoo" else ref
    torch.manual_seed(123)
    expected = torch.rand(5)
    torch.manual_seed(123)
    load_model(ref, store=store)
    assert torch.equal(torch.rand(5), expected)


def test_trained_and_pretrained_loads_leave_the_rng_alone_too(trained_store):
    store, refs = trained_store  # building the architecture before loading its weights draws from the RNG
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    load_model(refs[0], store=store)
    assert torch.equal(torch.rand(3), expected)


def test_another_thread_drawing_meanwhile_changes_no_weight(trained_store):
    """A server builds a page's model while another thread draws from torch's global RNG (a background timing
    runs a stitch, which seeds it): the weights are the ones a quiet process draws.  They once were not, and
    two servers showed two fingerprints for one random-init ref."""
    store, refs = trained_store
    quiet = {ref: weights_fingerprint(load_model(ref, store=store).model) for ref in (TIMM, random_twin(refs[0], 4))}
    stop = threading.Event()

    def draw() -> None:
        while not stop.is_set():
            torch.manual_seed(1)
            torch.rand(1000)

    noise = threading.Thread(target=draw, daemon=True)
    noise.start()
    try:
        for _ in range(3):
            busy = {ref: weights_fingerprint(load_model(ref, store=store).model) for ref in quiet}
            assert busy == quiet
    finally:
        stop.set()
        noise.join()


def test_zoo_random_weights_are_the_seeded_ones_as_before(trained_store):
    store, refs = trained_store
    loaded = load_model(f"{refs[0]}?init=random&seed=3", store=store)
    torch.manual_seed(3)  # how zoo: random twins were built before: their weights must not move
    before = create_arch(loaded.meta["arch"], **loaded.meta["arch_kwargs"])
    assert _same(before.state_dict(), loaded.model.state_dict())
    info = describe_model(loaded)
    assert info["init"] == "random init, seed 3"
    assert info["accuracy"] is None  # the stored accuracy is the trained model's, not the random twin's
    assert describe_model(load_model(refs[0], store=store))["init"] == ""


def test_default_seed_keeps_the_canonical_ref():
    for ref in (TIMM, TV, "hf:/some/dir?task=image-classification"):
        assert str(parse_ref(ref + "&seed=0")) == str(parse_ref(ref))  # run ids of seedless refs do not move
        assert str(parse_ref(ref + "&seed=000")) == str(parse_ref(ref))
        assert parse_ref(ref + "&seed=03").param("seed") == "3"
    assert str(parse_ref(TIMM + "&seed=2")) == "timm:resnet18?num_classes=10&pretrained=false&seed=2"
    # zoo: refs spell seed=0 out as stored runs do
    assert str(parse_ref("zoo:cnn-digits-s0?init=random&seed=0")) == "zoo:cnn-digits-s0?init=random&seed=0"


def test_the_same_weights_load_under_every_spelling_of_the_default():
    a, b = load_model(TIMM), load_model(TIMM + "&seed=0")
    assert a.ref == b.ref and _same(a.model.state_dict(), b.model.state_dict())
    assert describe_model(a)["init"] == "random init, seed 0"
    assert describe_model(load_model(TIMM + "&seed=5"))["init"] == "random init, seed 5"
    assert load_model(TV + "&seed=5").meta["init_seed"] == 5


@pytest.mark.parametrize(
    ("ref", "match"),
    [
        ("timm:resnet18?seed=3",
         (r"is for random weights, but pretrained weights are not drawn: "
          r".* write timm:resnet18\?pretrained=false&seed=3")),
        ("torchvision:resnet18?seed=2&num_classes=10",
         r"write torchvision:resnet18\?num_classes=10&seed=2&weights=none"),
        ("torchvision:resnet18?weights=IMAGENET1K_V1&seed=2", r"weights=none"),
        ("timm:resnet18@file=/w.safetensors?seed=1", r"@file= ref's weights come from its file"),
        ("torchvision:resnet18@file=/w.pth?seed=1", r"@file= ref's weights come from its file"),
        (TIMM + "&seed=-1", r"bad seed '-1'.*whole number"),
        (TV + "&seed=one", r"bad seed 'one'.*whole number"),
    ],
)  # fmt: skip
def test_seed_where_nothing_is_drawn_is_refused(ref, match):
    with pytest.raises(RefError, match=match):
        load_model(ref)


def test_random_twin_of_hub_refs_is_a_seeded_random_init():
    assert random_twin(TIMM, 0) == str(parse_ref(TIMM))
    for ref, seed, twin in [
        ("timm:resnet18?num_classes=10", 2, "timm:resnet18?num_classes=10&pretrained=false&seed=2"),
        ("torchvision:resnet18?weights=IMAGENET1K_V1", 1, "torchvision:resnet18?seed=1&weights=none"),
        ("timm:resnet18@file=/w.pt?num_classes=3", 1, "timm:resnet18?num_classes=3&pretrained=false&seed=1"),
        ("zoo:cnn-digits-s0", 0, "zoo:cnn-digits-s0?init=random&seed=0"),  # seed=0 written, as stored runs do
    ]:
        assert random_twin(ref, seed) == twin
    twin = load_model(random_twin("timm:resnet18?num_classes=10", 2))
    assert twin.meta["init_seed"] == 2 and twin.meta["weights"] == "random"
    refused = [("hf:gpt2", "no random-init twin"), ("file:/m.pt?arch=zoo:cnn", "no random-init twin"),
               ("timm:resnet18@file=/w.pt", r"needs its head size: add \?num_classes=N")]  # fmt: skip
    for ref, match in refused:
        with pytest.raises(RefError, match=match):
            random_twin(ref, 1)


# ---------------------------------------------------------------- hf: tensors the checkpoint lacks


@pytest.fixture(scope="module")
def vit_base_dir(tmp_path_factory) -> Path:
    """A ViT base model (no classifier) saved by save_pretrained: as an image classifier its head is drawn."""
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(image_size=8, patch_size=4, num_channels=1, hidden_size=16, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=32, num_labels=3)  # fmt: skip
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("hf") / "vit-base"
    ViTModel(config, add_pooling_layer=False).save_pretrained(path)
    return path


def test_hf_tensors_missing_from_the_checkpoint_are_seeded(vit_base_dir):
    ref = f"hf:{vit_base_dir}?task=image-classification"
    torch.manual_seed(1)
    a = load_model(ref)
    torch.manual_seed(2)
    torch.rand(100)
    b = load_model(ref)
    assert _same(a.model.state_dict(), b.model.state_dict())
    assert a.meta["random_tensors"] == ["classifier.bias", "classifier.weight"]
    assert describe_model(a)["init"] == ("random init of the tensors not in the checkpoint "
                                         "(classifier.bias, classifier.weight), seed 0")  # fmt: skip
    other = load_model(ref + "&seed=1")
    assert not torch.equal(other.model.hf.classifier.weight, a.model.hf.classifier.weight)
    assert torch.equal(other.model.hf.vit.embeddings.patch_embeddings.projection.weight,
                       a.model.hf.vit.embeddings.patch_embeddings.projection.weight)  # loaded, not drawn


def test_hf_seed_on_a_complete_checkpoint_is_refused(tmp_path):
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(image_size=8, patch_size=4, num_channels=1, hidden_size=16, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=32, num_labels=3)  # fmt: skip
    ViTForImageClassification(config).save_pretrained(tmp_path / "vit")
    assert describe_model(load_model(f"hf:{tmp_path / 'vit'}"))["init"] == ""
    with pytest.raises(RefError, match="holds every tensor of its model: none is drawn at random"):
        load_model(f"hf:{tmp_path / 'vit'}?seed=2")
