"""A run moves its models whole, and what it traces with follows the model: the GPU path's first failures.

On an H100 (bench/gpu_check.py, 2026-11-27) matrices, assemble and every timm/torchvision stitch failed with
"Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor)": a suffix moved alone left its model on
two devices, and the example batch that cuts are traced with stayed on the CPU. CI has no GPU; the ``meta``
device stands in for "another device" here.
"""

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
