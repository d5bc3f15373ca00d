"""Trait metrics: what a classifier does on a class, a confusion, or one half of a two-cue image.

A metric is named by one canonical string, used unchanged in specs, results and plots::

    accuracy              overall accuracy on the evaluation set
    class_acc:3           accuracy on the test examples of class 3 (class_acc:3,5 for a set)
    confusion:3->8        fraction of class-3 test examples predicted as 8
    blackout:left         accuracy with the left half blacked out (two-cue datasets)
    blackout:right        accuracy with the right half blacked out
    decor:left            accuracy when the left picture's class is random (label follows the right)
    decor:right           accuracy when the right picture's class is random (label follows the left)

The last four evaluate on a variant of the two-cue evaluation set (see
:mod:`stitchcore.data.twocue`); :func:`metric_dataset` names it.

Every metric is the mean of a 0/1 value per test example over the examples it reads (:func:`indicators`:
class_acc those of its classes, confusion i->j those of class i), a proportion, so its 95% interval is the
exact binomial one over those examples (:func:`compute_ci`, ``intervals.proportion_ci``; on digits a class
has ~46 test images, so a class's interval is wide, and 46 of 46 right is not [1, 1]).

>>> parse_metric("confusion: 3 -> 8").key
'confusion:3->8'
>>> import torch
>>> compute(parse_metric("confusion:1->0"), torch.tensor([[2., 0.], [0., 2.]]), torch.tensor([1, 1]))
0.5
>>> indicators(parse_metric("confusion:1->0"), torch.tensor([[2., 0.], [0., 2.]]), torch.tensor([1, 1]))
tensor([1., 0.])
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from stitchcore.data.twocue import twocue_variant
from stitchcore.errors import StitchError
from stitchcore.measures.intervals import proportion_ci

__all__ = [
    "METRIC_HELP",
    "TraitMetric",
    "accuracy",
    "class_accuracy",
    "compute",
    "compute_ci",
    "confusion_rate",
    "indicators",
    "metric_dataset",
    "parse_metric",
]  # fmt: skip

METRIC_HELP = "accuracy, class_acc:3 (or 3,5), confusion:3->8, blackout:left|right, decor:left|right"
_PATTERNS = {
    "accuracy": re.compile(r"accuracy"),
    "class_acc": re.compile(r"class_acc:(\d+(?:,\d+)*)"),
    "confusion": re.compile(r"confusion:(\d+)->(\d+)"),
    "blackout": re.compile(r"blackout:(left|right)"),
    "decor": re.compile(r"decor:(left|right)"),
}


@dataclass(frozen=True)
class TraitMetric:
    """A parsed trait metric; ``key`` is its canonical spelling."""

    key: str  # e.g. "confusion:3->8"
    kind: str  # accuracy | class_acc | confusion | blackout | decor
    classes: tuple[int, ...] = ()  # class_acc: the set; confusion: (source, target)
    side: str | None = None  # blackout / decor: "left" | "right"

    @property
    def label(self) -> str:
        """Legend text: 'accuracy on class 3', '3 predicted as 8' ..."""
        if self.kind == "class_acc":
            return f"accuracy on class {','.join(map(str, self.classes))}"
        if self.kind == "confusion":
            return f"{self.classes[0]} predicted as {self.classes[1]}"
        if self.kind == "blackout":
            return f"accuracy, {self.side} half black"
        if self.kind == "decor":
            return f"accuracy, {self.side} cue random"
        return "accuracy"


def parse_metric(text: str) -> TraitMetric:
    """Parse a metric string (spaces ignored); StitchError naming the grammar otherwise."""
    t = text.replace(" ", "").lower()
    for kind, pat in _PATTERNS.items():
        m = pat.fullmatch(t)
        if m is None:
            continue
        if kind == "accuracy":
            return TraitMetric("accuracy", kind)
        if kind == "class_acc":
            classes = tuple(sorted({int(v) for v in m[1].split(",")}))
            return TraitMetric(f"class_acc:{','.join(map(str, classes))}", kind, classes)
        if kind == "confusion":
            src, dst = int(m[1]), int(m[2])
            if src == dst:
                raise StitchError(f"confusion {src}->{dst} names one class; use class_acc:{src} for its accuracy")
            return TraitMetric(f"confusion:{src}->{dst}", kind, (src, dst))
        return TraitMetric(f"{kind}:{m[1]}", kind, side=m[1])
    raise StitchError(f"unknown trait metric {text!r}; use one of: {METRIC_HELP}")


def metric_dataset(metric: TraitMetric, dataset: str) -> str:
    """The evaluation set the metric reads: ``dataset`` itself, or its two-cue variant."""
    if metric.kind == "blackout":
        return twocue_variant(dataset, f"black{metric.side}")
    if metric.kind == "decor":
        return twocue_variant(dataset, f"decor{metric.side}")
    return dataset


def check_classes(metric: TraitMetric, num_classes: int) -> None:
    """StitchError when the metric names a class the dataset lacks."""
    bad = [c for c in metric.classes if c >= num_classes]
    if bad:
        raise StitchError(f"metric {metric.key} names class(es) {bad}, but the data has classes 0..{num_classes - 1}")


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """logits [N, K], labels [N] -> fraction correct."""
    return float((logits.argmax(1) == labels).float().mean())


def class_accuracy(logits: torch.Tensor, labels: torch.Tensor, classes: tuple[int, ...]) -> float | None:
    """Accuracy on the examples whose label is in ``classes`` (None when there are none)."""
    mask = torch.isin(labels, torch.tensor(classes, dtype=labels.dtype))
    return accuracy(logits[mask], labels[mask]) if mask.any() else None


def confusion_rate(logits: torch.Tensor, labels: torch.Tensor, src: int, dst: int) -> float | None:
    """Fraction of class-``src`` examples predicted as ``dst`` (None when there are none)."""
    mask = labels == src
    return float((logits[mask].argmax(1) == dst).float().mean()) if mask.any() else None


def compute(metric: TraitMetric, logits: torch.Tensor, labels: torch.Tensor) -> float | None:
    """The metric's value from logits [N, K] and labels [N] of :func:`metric_dataset`'s test split."""
    if metric.kind == "class_acc":
        value = class_accuracy(logits, labels, metric.classes)
    elif metric.kind == "confusion":
        value = confusion_rate(logits, labels, *metric.classes)
    else:
        value = accuracy(logits, labels)
    return None if value is None else round(value, 6)


def indicators(metric: TraitMetric, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor | None:
    """float [n]: the 0/1 value per example whose mean is the metric, over the n examples it reads (class_acc:
    those of its classes, 1 where right; confusion i->j: those of class i, 1 where predicted j; the others:
    every example, 1 where right); None where it reads none."""
    pred = logits.argmax(1)  # [N]
    if metric.kind == "class_acc":
        mask = torch.isin(labels, torch.tensor(metric.classes, dtype=labels.dtype))
        hit = pred == labels
    elif metric.kind == "confusion":
        mask = labels == metric.classes[0]
        hit = pred == metric.classes[1]
    else:
        mask = torch.ones_like(labels, dtype=torch.bool)
        hit = pred == labels
    return hit[mask].float() if mask.any() else None


def compute_ci(metric: TraitMetric, logits: torch.Tensor, labels: torch.Tensor,
               seed: int = 0) -> list[float] | None:  # fmt: skip
    """The 95% interval [lo, hi] of :func:`compute`'s value: Clopper-Pearson over the examples it reads (None
    where it reads none; ``seed`` is kept for callers, an exact interval draws nothing).

    >>> logits = torch.eye(2).repeat(23, 1)  # 46 examples, every one predicted as its label
    >>> compute_ci(parse_metric("accuracy"), logits, torch.tensor([0, 1] * 23))  # 46/46: not [1, 1]
    [0.922938, 1.0]
    """
    values = indicators(metric, logits, labels)
    return None if values is None else list(proportion_ci(int(values.sum().item()), len(values)))
