"""Training loops: zoo classifiers from a recipe, and adapters between frozen halves.

Both loops check the cancel flag every step, log metrics through the run
context, and stop with a clear :class:`TrainingError` when the loss is NaN/inf.
Frozen modules are put in eval mode and never get gradients; only the adapter
(or the zoo model being trained) changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from stitchcore.errors import TrainingError
from stitchcore.stitching.precision import autocast

__all__ = [
    "TrainKnobs",
    "make_optimizer",
    "cosine_schedule",
    "check_finite",
    "AdapterTargets",
    "train_adapter",
    "train_classifier",
    "Pruner",
    "recalibrate_batchnorm",
]


def make_optimizer(
    params, name: str, lr: float, weight_decay: float, momentum: float = 0.9
) -> torch.optim.Optimizer:
    """``sgd`` (momentum, weight decay) or ``adamw``; a value torch refuses is a one-line TrainingError.

    >>> make_optimizer([nn.Parameter(torch.zeros(1))], "adamw", lr=-1.0, weight_decay=0.0)
    Traceback (most recent call last):
    ...
    stitchcore.errors.TrainingError: the optimizer refuses lr=-1.0, weight_decay=0.0: Invalid learning rate: \
-1.0; lr must be > 0 and weight decay >= 0
    """
    params = [p for p in params if p.requires_grad]
    try:
        if name == "sgd":
            return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    except ValueError as exc:  # torch's "Invalid learning rate: -1.0" and the like
        if not str(exc).startswith("Invalid"):
            raise
        raise TrainingError(f"the optimizer refuses lr={lr}, weight_decay={weight_decay}: {exc};"
                            " lr must be > 0 and weight decay >= 0") from None  # fmt: skip


def cosine_schedule(optimizer: torch.optim.Optimizer, total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Cosine decay from the base lr to 0 over ``total_steps`` (Traft & Cheney)."""
    total = max(1, total_steps)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))


def check_finite(loss: torch.Tensor, step: int) -> None:
    if not torch.isfinite(loss):
        raise TrainingError(
            f"loss became {loss.item()} at step {step}: training diverged; lower the learning rate"
            " (or start the adapter from --init lstsq)"
        )


class Pruner:
    """Magnitude pruning of conv/linear weights, masks re-applied after every step."""

    def __init__(self, model: nn.Module) -> None:
        self.params = [m.weight for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
        self.masks = [torch.ones_like(p, dtype=torch.bool) for p in self.params]

    @torch.no_grad()
    def prune(self, fraction: float) -> float:
        """Zero ``fraction`` of each tensor's remaining weights (smallest magnitude); returns sparsity."""
        for p, mask in zip(self.params, self.masks, strict=True):
            alive = p[mask].abs()
            k = int(fraction * alive.numel())
            if k > 0:
                threshold = alive.kthvalue(k).values
                mask &= p.abs() > threshold
        self.apply()
        total = sum(m.numel() for m in self.masks)
        return 1.0 - sum(int(m.sum()) for m in self.masks) / total

    @torch.no_grad()
    def apply(self) -> None:
        for p, mask in zip(self.params, self.masks, strict=True):
            p.mul_(mask)


@dataclass
class AdapterTargets:
    """Training data for an adapter, aligned by index with the cached sender activations."""

    labels: torch.Tensor  # int64 [N] class labels (task objective)
    receiver: torch.Tensor | None = None  # [N, *receiver shape] B's own activation at its cut (match)
    teacher_logits: torch.Tensor | None = None  # [N, K] B's logits (kd)
    final: torch.Tensor | None = None  # [N, D] B's own final features, its head's input (final)


@dataclass(frozen=True)
class TrainKnobs:
    """How an adapter is trained, as one value: what the image adapter loops (:func:`train_adapter`,
    ``shared_suffix.train_adapters_shared_suffix``) take beside their data.

    A spec hands its own over whole (:meth:`of`), so a new knob is one field here, not a keyword in
    every call.

    >>> from types import SimpleNamespace as NS
    >>> TrainKnobs.of(NS(optimizer="adamw", lr=1e-3, weight_decay=0.0, epochs=2, batch_size=64, seed=1, a="x"))
    TrainKnobs(optimizer='adamw', lr=0.001, weight_decay=0.0, epochs=2, batch_size=64, seed=1)
    """

    optimizer: str  # a name of OPTIMIZERS; every adapter loop follows a cosine schedule to 0
    lr: float
    weight_decay: float
    epochs: int  # passes over the cached activations
    batch_size: int
    seed: int  # the order of the examples

    @classmethod
    def of(cls, spec: object) -> TrainKnobs:
        """The knobs a spec (or any object with these six attributes) names."""
        return cls(spec.optimizer, spec.lr, spec.weight_decay, spec.epochs, spec.batch_size, spec.seed)


def train_adapter(
    adapter: nn.Module,
    suffix: nn.Module,
    sender_acts: torch.Tensor,
    targets: AdapterTargets,
    *,
    objective: dict[str, float],
    knobs: TrainKnobs,
    device: torch.device,
    precision: str = "fp32",
    kd_temperature: float = 2.0,
    on_step: Callable[[int, int, dict[str, float]], None] | None = None,
    on_epoch: Callable[[int], dict[str, float]] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> list[dict[str, float]]:
    """Train ``adapter`` so that ``suffix(adapter(h))`` fits the objective; suffix stays frozen.  The ``final`` term
    needs a ``final_features.HeadInput`` suffix (logits and final features [B, D]) and ``targets.final``.

    sender_acts: [N, *sender shape] cached prefix_A outputs (CPU, float32 or float16), or anything indexed
    the same way (``activations.OnDemand``: computed per batch).  ``precision`` "bf16": the adapter and
    suffix run under bf16 autocast; weights, optimiser and loss stay float32.
    on_step(step, total_steps, metrics) is called every step; on_epoch(epoch)
    returns evaluation metrics merged into that epoch's record.
    Returns one metrics dict per epoch.
    """
    optimizer, lr, weight_decay, epochs, batch_size, seed = (
        knobs.optimizer, knobs.lr, knobs.weight_decay, knobs.epochs, knobs.batch_size, knobs.seed)
    suffix.eval()
    for p in suffix.parameters():
        p.requires_grad_(False)
    if "final" in objective and targets.final is None:
        raise TrainingError("the final objective needs B's own final features (AdapterTargets.final)")
    run_top = bool({"task", "kd", "final"} & set(objective))
    adapter.to(device).train()
    params = [p for p in adapter.parameters() if p.requires_grad]
    n = len(sender_acts)
    steps_per_epoch = math.ceil(n / batch_size)
    total = steps_per_epoch * epochs
    if not params or total == 0:
        return []
    opt = make_optimizer(params, optimizer, lr, weight_decay)
    sched = cosine_schedule(opt, total)
    gen = torch.Generator().manual_seed(seed)
    history: list[dict[str, float]] = []
    step = 0
    for epoch in range(epochs):
        adapter.train()
        order = torch.randperm(n, generator=gen)
        running, seen = 0.0, 0
        for start in range(0, n, batch_size):
            if check_cancel is not None:
                check_cancel()
            idx = order[start : start + batch_size]
            if len(idx) < 2 and n >= 2:  # BatchNorm needs two samples in train mode
                continue
            h = sender_acts[idx].to(device, torch.float32)
            with autocast(device, precision == "bf16"):
                mid = adapter(h)
                logits = suffix(mid) if run_top else None
            if "final" in objective:  # a HeadInput suffix: (logits [B, K], final features [B, D])
                logits, final = logits
                want = targets.final[idx].to(device, torch.float32)
            mid, logits = mid.float(), None if logits is None else logits.float()
            loss = torch.zeros((), device=device)
            if "match" in objective:
                y = targets.receiver[idx].to(device, torch.float32)
                loss = loss + objective["match"] * F.mse_loss(mid, y)
            if "final" in objective:
                loss = loss + objective["final"] * F.mse_loss(final.float(), want)
            if logits is not None:
                if "task" in objective:
                    loss = loss + objective["task"] * F.cross_entropy(logits, targets.labels[idx].to(device))
                if "kd" in objective:
                    t = kd_temperature
                    teacher = F.log_softmax(targets.teacher_logits[idx].to(device, torch.float32) / t, dim=1)
                    student = F.log_softmax(logits / t, dim=1)
                    kd = F.kl_div(student, teacher, log_target=True, reduction="batchmean") * t * t
                    loss = loss + objective["kd"] * kd
            check_finite(loss, step)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            running += loss.item() * len(idx)
            seen += len(idx)
            if on_step is not None:
                on_step(step, total, {"loss": loss.item(), "lr": sched.get_last_lr()[0]})
        record = {"epoch": epoch + 1, "train_loss": running / max(seen, 1)}
        if on_epoch is not None:
            adapter.eval()
            record.update(on_epoch(epoch + 1))
        history.append(record)
    adapter.eval()
    return history


def train_classifier(
    model: nn.Module,
    batches_per_epoch: Callable[[int], Iterable[tuple[torch.Tensor, torch.Tensor]]],
    steps_per_epoch: int,
    *,
    optimizer: str,
    lr: float,
    weight_decay: float,
    momentum: float,
    epochs: int,
    device: torch.device,
    l1: float = 0.0,
    l2: float = 0.0,
    prune_every: int = 0,
    prune_fraction: float = 0.0,
    on_step: Callable[[int, int, dict[str, float]], None] | None = None,
    on_epoch: Callable[[int], dict[str, float]] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> list[dict[str, float]]:
    """Train a whole classifier (a zoo recipe): cross-entropy + optional L1/L2, pruning.

    batches_per_epoch(epoch) yields (input [B, ...] already preprocessed, label [B]).
    Returns one metrics dict per epoch (train loss, sparsity, plus on_epoch's).
    """
    model.to(device)
    opt = make_optimizer(model.parameters(), optimizer, lr, weight_decay, momentum)
    total = steps_per_epoch * epochs
    sched = cosine_schedule(opt, total)
    pruner = Pruner(model) if prune_every > 0 and prune_fraction > 0 else None
    weights = [m.weight for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    history: list[dict[str, float]] = []
    step = 0
    sparsity = 0.0
    for epoch in range(epochs):
        model.train()
        running, seen = 0.0, 0
        for x, y in batches_per_epoch(epoch):
            if check_cancel is not None:
                check_cancel()
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(model(x), y)
            if l1 > 0:
                loss = loss + l1 * sum(w.abs().sum() for w in weights)
            if l2 > 0:
                loss = loss + l2 * sum(w.pow(2).sum() for w in weights)
            check_finite(loss, step)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            if pruner is not None:
                pruner.apply()
            step += 1
            running += loss.item() * len(y)
            seen += len(y)
            if on_step is not None:
                on_step(step, total, {"loss": loss.item()})
        if pruner is not None and (epoch + 1) % prune_every == 0 and epoch + 1 < epochs:
            sparsity = pruner.prune(prune_fraction)
        record = {"epoch": epoch + 1, "train_loss": running / max(seen, 1)}
        if pruner is not None:
            record["sparsity"] = sparsity
        if on_epoch is not None:
            model.eval()
            record.update(on_epoch(epoch + 1))
        history.append(record)
    model.eval()
    return history


OPTIMIZERS = ("sgd", "adamw")  # what make_optimizer builds
# adapter training objectives (AdapterTargets): B's labels, B's activation at the cut, B's logits, B's final features
OBJECTIVES = ("task", "match", "kd", "final")


@torch.no_grad()
def recalibrate_batchnorm(module: nn.Module, inputs: torch.Tensor, device: torch.device, *, batch_size: int = 256
                          ) -> None:  # fmt: skip
    """Set ``module``'s BatchNorm running statistics to the exact mean and variance of ``inputs`` [N, ...]
    (one pass in train mode, no weight changes); ``module`` is left in eval mode.

    Training moves them by momentum 0.1 a step, which still carries the start (mean 0, var 1) after a short
    run: a bottleneck adapter (three BNs inside) trained 21 steps scored below chance in eval mode until
    recalibrated.

    >>> bn = nn.BatchNorm1d(2)
    >>> recalibrate_batchnorm(bn, torch.tensor([[1.0, 4.0], [3.0, 8.0]]), torch.device("cpu"))
    >>> bn.running_mean.tolist(), bn.training
    ([2.0, 6.0], False)
    """
    norms = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        module.eval()
        return
    saved = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the pass
    module.train()
    for i in range(0, len(inputs), batch_size):
        module(inputs[i : i + batch_size].to(device, torch.float32))
    for m, momentum in zip(norms, saved, strict=True):
        m.momentum = momentum
    module.eval()


def parse_objective(text: str) -> dict[str, float]:
    """``"task"`` -> {"task": 1.0}; ``"task+0.5*match"`` -> {"task": 1.0, "match": 0.5}.

    >>> parse_objective("task+0.5*kd")
    {'task': 1.0, 'kd': 0.5}
    """
    weights: dict[str, float] = {}
    for term in text.replace(" ", "").split("+"):
        weight, _, name = term.rpartition("*")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            raise TrainingError(f"bad objective term {term!r}; write e.g. 'task', 'final' or 'task+0.5*kd'") from None
        if name not in OBJECTIVES:
            raise TrainingError(f"unknown objective {name!r}; use one of: {', '.join(OBJECTIVES)}")
        weights[name] = weights.get(name, 0.0) + w
    return weights
