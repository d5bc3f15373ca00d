"""A run moves its models whole, and what it traces with follows the model: the GPU path's first failures.

On an H100 (bench/gpu_check.py, 2026-11-27) matrices, assemble and every timm/torchvision stitch failed with
"Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor)": a suffix moved alone left its model on
two devices, and the example batch that cuts are traced with stayed on the CPU. CI has no GPU; the ``meta``
device stands in for "another device" here.
"""

import pytest
import torch

from stitchcore.models.sources import load_model


def test_to_moves_the_whole_model_in_eval_mode_and_returns_it():
    m = load_model("timm:test_resnet?pretrained=false&num_classes=10")
    m.model.train()
    assert m.to("meta") is m
    assert {p.device.type for p in m.model.parameters()} == {"meta"}
    assert {b.device.type for b in m.model.buffers()} == {"meta"}
    assert not m.model.training


def test_the_example_batch_is_on_the_models_device_with_the_same_shape():
    m = load_model("timm:test_resnet?pretrained=false&num_classes=10")
    on_cpu = m.example_input(3)
    assert on_cpu.device.type == "cpu" and on_cpu.shape == (3, *m.input_shape)
    m.to("meta")
    moved = m.example_input(3)
    assert moved.device.type == "meta" and moved.shape == on_cpu.shape and moved.dtype == on_cpu.dtype
    assert torch.equal(load_model(m.ref).example_input(3), on_cpu)  # the same values each time it is made


def _stitch(tmp_path, name, a, b, cut_a, cut_b, **kw):
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.stitch import StitchSpec
    from stitchcore.store.results import Store

    # no validation split (10% of every train image, at the model's input size: more images than max_train) and no
    # noise-sender adapter: neither is what these tests compare, and they were most of the convolutions
    kw = {"max_train": 128, "max_test": 64, "val_fraction": 0.0, "noise_control": False, **kw}
    spec = StitchSpec(a, b, cut_a, cut_b, epochs=1, dataset="digits", **kw)
    with Store(tmp_path / name) as store:
        return spec, run_experiment("stitch", spec, store, device="cpu").record.summary


def test_a_bf16_stitch_trains_in_float32_weights_and_lands_near_the_fp32_one(tmp_path):
    ref = "timm:test_resnet?pretrained=false&num_classes=10"
    spec32, fp32 = _stitch(tmp_path, "fp32", ref, ref + "&seed=1", "layer1.0", "layer1.0")
    spec16, bf16 = _stitch(tmp_path, "bf16", ref, ref + "&seed=1", "layer1.0", "layer1.0", precision="bf16")
    assert "precision" not in spec32.to_dict() and spec16.to_dict()["precision"] == "bf16"  # old run ids kept
    assert " · bf16" in spec16.settings()
    for key in ("a", "b"):  # random-init models score by chance; bf16 only rounds their logits
        assert abs(bf16["base"][key] - fp32["base"][key]) <= 4 / 64
    assert abs(bf16["history"][0]["train_loss"] - fp32["history"][0]["train_loss"]) < 0.05 * fp32["history"][0]["train_loss"]


@pytest.mark.parametrize("family", ["timm", "torchvision"])
def test_channels_last_models_stitch_as_the_default_layout_does(tmp_path, monkeypatch, family):
    """On CUDA conv nets go channels_last; forced here on the CPU, a stitch must give the same numbers."""
    refs = {
        "timm": ("timm:test_resnet?pretrained=false&num_classes=10", "layer1.0"),
        "torchvision": ("torchvision:resnet18?weights=none&num_classes=10", "layer2"),
    }
    ref, cut = refs[family]
    n = {"max_train": 32, "max_test": 32}
    _, plain = _stitch(tmp_path, "plain", ref, ref + "&seed=1", cut, cut, **n)
    monkeypatch.setenv("STITCHLAB_CHANNELS_LAST", "1")
    m = load_model(ref).to("cpu")
    conv = next(p for p in m.model.parameters() if p.dim() == 4)
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
    _, nhwc = _stitch(tmp_path, "nhwc", ref, ref + "&seed=1", cut, cut, **n)
    assert nhwc["accuracy"] == plain["accuracy"] and nhwc["base"] == plain["base"]
    assert abs(nhwc["history"][0]["train_loss"] - plain["history"][0]["train_loss"]) < 1e-3
