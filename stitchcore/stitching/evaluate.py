"""Evaluation: accuracy, per-class accuracy, penalties, parameter counts."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

if TYPE_CHECKING:
    from stitchcore.data.images import ImageDataset
    from stitchcore.models.loaded import LoadedModel

__all__ = ["ClassifierScore", "score_logits", "evaluate_batches", "model_accuracy", "count_params", "module_flops",
           "stitching_penalty"]


class ClassifierScore(dict):
    """{'accuracy': float, 'per_class': [float|None per class], 'n': int} (a plain dict for JSON); ``.correct``:
    float [N], 1.0 where the example was classified right (what intervals resample; not part of the dict)."""

    correct: torch.Tensor


def score_logits(logits: torch.Tensor, labels: torch.Tensor, num_classes: int) -> ClassifierScore:
    """logits [N, K], labels [N] -> accuracy and per-class accuracy (None for absent classes)."""
    pred = logits.argmax(dim=1)
    correct = (pred == labels).float()
    per_class: list[float | None] = []
    for k in range(num_classes):
        mask = labels == k
        per_class.append(round(correct[mask].mean().item(), 6) if mask.any() else None)
    score = ClassifierScore(accuracy=round(correct.mean().item(), 6), per_class=per_class, n=int(len(labels)))
    score.correct = correct
    return score


@torch.no_grad()
def evaluate_batches(
    forward: Callable[[torch.Tensor], torch.Tensor],
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    num_classes: int,
    device: torch.device,
) -> ClassifierScore:
    """Score ``forward`` (inputs [B, ...] -> logits [B, K]) over (input, label) batches."""
    logits, labels = [], []
    for x, y in batches:
        logits.append(forward(x.to(device)).float().cpu())
        labels.append(y)
    return score_logits(torch.cat(logits), torch.cat(labels), num_classes)


def model_accuracy(loaded: LoadedModel, ds: ImageDataset, *, split: str = "test", batch_size: int = 256,
                   device: torch.device | None = None) -> float:
    """Accuracy of a loaded classifier on one split of ``ds``, through the model's own preprocessing
    (``loaded.preprocess``: the dataset's [0, 1] images -> the model's input); the model stays on ``device``
    (default: CPU, where models loaded for display live)."""
    device = device or torch.device("cpu")
    batches = ds.model_batches(split, batch_size, loaded.preprocess, device)  # model input [B, ...] on device
    return evaluate_batches(loaded.model, batches, ds.num_classes, device)["accuracy"]


def count_params(module: nn.Module, trainable_only: bool = True) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def module_flops(module: nn.Module | Callable[[torch.Tensor], torch.Tensor], example: torch.Tensor) -> int:
    """FLOPs of one eval forward of ``module`` on ``example`` [1, ...] as ``FlopCounterMode`` counts them
    (2 per multiply-add of matmuls, convs and attention; not norms, activations, pooling or resampling).

    >>> module_flops(nn.Linear(4, 3), torch.zeros(1, 4))
    24
    """
    was = [(m, m.training) for m in module.modules()] if isinstance(module, nn.Module) else []
    for m, _ in was:
        m.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            module(example)
    finally:
        for m, training in was:
            m.train(training)
    return int(counter.get_total_flops())


def stitching_penalty(base_accuracy: float, stitched_accuracy: float) -> float:
    """Bansal et al.: accuracy(B) - accuracy(C), B being the model whose top is used."""
    return round(base_accuracy - stitched_accuracy, 6)
