"""What a sweep's worker runs: :func:`position_unit`, the stitch at one position (the adapter trained, the
stitched model measured), its noise sender and its random-init controls, one row; and the same measures of A and
B alone (the reference lines)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from stitchcore.backends import UnitContext
from stitchcore.cuts import Cut, split
from stitchcore.data.images import ImageDataset
from stitchcore.errors import AdapterError
from stitchcore.experiments._registry import RunContext
from stitchcore.experiments.sweep.plan import _Data
from stitchcore.experiments.sweep.spec import SweepSpec
from stitchcore.measures.intervals import (
    grouped_mean_ci,
    mean_ci,
    pack_outcomes,
    unpack_outcomes,
)
from stitchcore.measures.simplicity import report_simplicity, simplicity
from stitchcore.measures.traits import compute, compute_ci, parse_metric
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.package import ModelPackage
from stitchcore.stitching.activations import collect
from stitchcore.stitching.adapters import build_adapter, larger_map_refusal
from stitchcore.stitching.evaluate import score_logits
from stitchcore.stitching.final_features import HeadInput, checked_head
from stitchcore.stitching.fits import FIT_METHODS, fit_adapter
from stitchcore.stitching.noise_sender import clustered_noise
from stitchcore.stitching.train import AdapterTargets, TrainKnobs, parse_objective, train_adapter

__all__ = ["EVAL_BATCH", "position_unit"]

EVAL_BATCH = 256


def _forward(model: nn.Module, m: LoadedModel) -> nn.Module:
    """model(preprocess(x)) as one module (preprocessing has no weights)."""

    class WithPreprocess(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = model

        def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, C, H, W] images in [0, 1] -> logits [B, K]
            return self.net(m.preprocess(x) if m.preprocess is not None else x)

    return WithPreprocess()


def _batches(ds: ImageDataset, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return list(ds.batches("test", EVAL_BATCH, limit=n))


def _measure(spec: SweepSpec, data: _Data, logits: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Trait metric values and per-class accuracy from logits [N, K] per evaluation set, with their 95% intervals
    over the test examples each reads: {"metrics", "metrics_ci", "per_class", "per_class_ci", "outcomes"}
    (``outcomes``: which base test images it got right, packed, for :func:`penalty_ci_along`)."""
    values, spans = {}, {}
    for key, name in data.metric_sets.items():
        metric, labels = parse_metric(key), data.evals[name].labels("test")[: data.n_test]
        values[key] = compute(metric, logits[name], labels)
        spans[key] = compute_ci(metric, logits[name], labels, seed=spec.seed)
    labels = data.base.labels("test")[: data.n_test]
    score = score_logits(logits[data.base.name], labels, data.base.num_classes)
    return {"metrics": values, "metrics_ci": spans, "per_class": score["per_class"],
            "per_class_ci": grouped_mean_ci(score.correct, labels, data.base.num_classes, seed=spec.seed),
            "outcomes": pack_outcomes(score.correct)}


def _simplicity(spec: SweepSpec, model: nn.Module, data: _Data, adapter: nn.Module | None = None) -> dict[str, Any]:
    """The project's measures (over A's and B's weights and, with ``simplicity_adapter``, the adapter's; runs
    stored before leave the adapter out) and, with ``simplicity_report``, the report's (every parameter, test
    batches of ``batch_size``)."""
    exclude = adapter.parameters() if adapter is not None and not spec.simplicity_adapter else ()
    out = simplicity(model, _batches(data.base, data.n_test), eps=spec.sharpness_eps, draws=spec.sharpness_draws,
                     seed=spec.seed, exclude=exclude)  # fmt: skip
    out.pop("definition", None)
    if spec.simplicity_report:
        batches = list(data.base.batches("test", spec.batch_size, limit=data.n_test))
        out.update(report_simplicity(model, batches, seed=spec.seed))
    return {k: (round(v, 8) if isinstance(v, float) else v) for k, v in out.items()}


@dataclass
class _Sender:
    """What a position's stitch trains on, kept for the noise sender trained after it at the same position."""

    suffix_b: nn.Module  # B's layers after its cut
    h_train: torch.Tensor  # [n_train, *cut_a.shape] A's activations on the training images
    y_train: torch.Tensor  # [n_train] their labels
    target: torch.Tensor | None  # [n_train, *cut_b.shape] B's activations (closed-form start, match), else None
    teacher: torch.Tensor | None = None  # [n_train, K] B's logits (kd), else None
    final: torch.Tensor | None = None  # [n_train, D] B's final features, its head's input (final), else None
    head: nn.Module | None = None  # B's classifier head (final), else None


def _train(spec: SweepSpec, ctx: UnitContext, cuts: tuple[Cut, Cut], sender: _Sender,
           h_train: torch.Tensor) -> tuple[nn.Module, list[dict[str, float]]]:  # fmt: skip
    """The adapter A[cut] -> B[cut] trained from ``h_train`` [n_train, *cut_a.shape] (A's activations, or a noise
    sender's) into ``sender.suffix_b``: built from ``spec.seed``, fitted to ``sender.target`` for a closed-form
    init, then trained on the spec's objective; (adapter in eval mode, per-epoch history)."""
    objective = parse_objective(spec.objective)
    torch.manual_seed(spec.seed)
    adapter = build_adapter(spec.adapter, *cuts)
    if adapter.plan.out_grid is not None and (why := larger_map_refusal(sender.suffix_b, adapter.to(ctx.device),
                                                                         ctx.device)) is not None:  # fmt: skip
        raise AdapterError(f"{why}; use resample bilinear", fix={"adapter.resample": "bilinear"})
    if spec.adapter.init in FIT_METHODS:
        pairs = ((h_train[i : i + EVAL_BATCH], sender.target[i : i + EVAL_BATCH])
                 for i in range(0, len(h_train), EVAL_BATCH))  # fmt: skip
        fit_adapter(adapter, pairs, method=spec.adapter.init)
    adapter.to(ctx.device)
    top = HeadInput(sender.suffix_b, sender.head) if "final" in objective else sender.suffix_b
    targets = AdapterTargets(labels=sender.y_train, receiver=sender.target, teacher_logits=sender.teacher,
                             final=sender.final)  # fmt: skip
    history = train_adapter(adapter, top, h_train, targets, objective=objective, knobs=TrainKnobs.of(spec),
                            device=ctx.device, check_cancel=ctx.check_cancel)  # fmt: skip
    adapter.eval()
    return adapter, history


@torch.no_grad()
def _logits(adapter: nn.Module, suffix_b: nn.Module, h: torch.Tensor, device: torch.device) -> torch.Tensor:
    """suffix_B(S(h)) for sender activations ``h`` [N, *cut_a.shape] -> logits [N, K] on the CPU."""
    return torch.cat([suffix_b(adapter(h[i : i + EVAL_BATCH].to(device))).float().cpu()
                      for i in range(0, len(h), EVAL_BATCH)])  # fmt: skip


def _stitch_at(
    spec: SweepSpec, ctx: UnitContext, a: LoadedModel, b: LoadedModel, cuts: tuple[Cut, Cut], data: _Data,
    with_simplicity: bool, gaps: bool = False,
) -> tuple[dict[str, Any], _Sender]:
    """Train the adapter A[cut] -> B[cut] and measure C = suffix_B(S(prefix_A(x))); (the row's measures, what the
    adapter was trained on).

    ``gaps``: also ``logit_gap`` {"a", "b"}: max |logit(C) − logit(A)| and the same against B over the test
    images (0.0 = C is that model bit for bit, as a weight substitution between a model and its own copy is).
    """
    device = ctx.device
    cut_a, cut_b = cuts
    a.to(device), b.to(device)  # whole, then split: a part moved alone leaves its model on two devices
    prefix_a, _ = split(a, cut_a)
    prefix_b, suffix_b = split(b, cut_b)
    acts = {"device": device, "batch_size": EVAL_BATCH, "check_cancel": ctx.check_cancel}
    h_train = collect(prefix_a, data.train, a.preprocess, "train", limit=data.n_train, **acts)  # [N, *cut.shape]
    objective = parse_objective(spec.objective)

    def of_b(module: nn.Module) -> torch.Tensor:  # [n_train, ...] ``module`` over the training images
        return collect(module, data.train, b.preprocess, "train", limit=data.n_train, **acts)

    target = of_b(prefix_b) if spec.adapter.init in FIT_METHODS or "match" in objective else None
    head = checked_head(b.model, b.example_input().to(device)) if "final" in objective else None
    sender = _Sender(suffix_b, h_train, data.train.labels("train")[: data.n_train], target,
                     teacher=of_b(b.model.eval()) if "kd" in objective else None,
                     final=of_b(HeadInput(b.model.eval(), head, features_only=True)) if head is not None else None,
                     head=head)  # fmt: skip
    adapter, history = _train(spec, ctx, cuts, sender, h_train)
    logits = {name: _logits(adapter, suffix_b, collect(prefix_a, ds, a.preprocess, "test", limit=data.n_test, **acts),
                            device) for name, ds in data.evals.items()}  # fmt: skip
    out: dict[str, Any] = _measure(spec, data, logits)
    if gaps:
        with torch.no_grad():
            c = logits[data.base.name]
            out["logit_gap"] = {}
            for role, m in (("a", a), ("b", b)):
                ref = torch.cat([_forward(m.model.to(device).eval(), m)(x.to(device)).float().cpu()
                                 for x, _ in _batches(data.base, data.n_test)])  # fmt: skip
                if ref.shape == c.shape:  # a coarse-label A's logits are another task's: no gap to it
                    out["logit_gap"][role] = float((c - ref).abs().max())
    if history:  # the adapter's training loss per epoch: a plateau shows as a flat tail
        out["train_loss"] = [round(r["train_loss"], 6) for r in history]
    if with_simplicity:
        stitched = _forward(nn.Sequential(prefix_a, adapter, suffix_b), a)
        out["simplicity"] = _simplicity(spec, stitched, data, adapter=adapter)
    return out, sender


def _noise_at(spec: SweepSpec, ctx: UnitContext, cuts: tuple[Cut, Cut], sender: _Sender, data: _Data) -> dict[str, Any]:
    """The noise-sender control at one position: the same adapter (init, seed, epochs, data order) trained from
    class-clustered noise of A's activation shape and scale (``clustered_noise`` over the training labels; the
    test images' labels give new draws from the same clusters) into B's suffix; its measures as a row's, plus
    ``accuracy`` and ``accuracy_ci`` on the evaluation set proper."""
    shape = tuple(sender.h_train.shape[1:])  # [*cut_a.shape]

    def noise(labels: torch.Tensor, split_name: str) -> torch.Tensor:  # [N, *cut_a.shape]
        return clustered_noise(labels, shape, n_classes=data.train.num_classes, seed=spec.seed, split=split_name,
                               like=sender.h_train)  # fmt: skip

    adapter, history = _train(spec, ctx, cuts, sender, noise(sender.y_train, "train"))
    logits = {name: _logits(adapter, sender.suffix_b, noise(ds.labels("test")[: data.n_test], "test"), ctx.device)
              for name, ds in data.evals.items()}  # fmt: skip
    out: dict[str, Any] = _measure(spec, data, logits)
    correct = unpack_outcomes(out["outcomes"])
    out["accuracy"] = round(float(correct.mean()), 6)
    out["accuracy_ci"] = list(mean_ci(correct, seed=spec.seed))
    if history:
        out["train_loss"] = [round(r["train_loss"], 6) for r in history]
    return out


@torch.no_grad()
def _reference(spec: SweepSpec, ctx: RunContext, m: LoadedModel, data: _Data) -> dict[str, Any]:
    """A or B alone: trait metrics, per-class accuracy, simplicity."""
    model = _forward(m.model.to(ctx.device).eval(), m)
    logits = {name: torch.cat([model(x.to(ctx.device)).float().cpu() for x, _ in _batches(ds, data.n_test)])
              for name, ds in data.evals.items()}  # fmt: skip
    out: dict[str, Any] = _measure(spec, data, logits)
    if spec.simplicity:
        with torch.enable_grad():
            out["simplicity"] = _simplicity(spec, model, data)
    return out


def position_unit(spec: SweepSpec, source: dict, i: int, n: int, pair: tuple[Cut, Cut],
                  context: UnitContext) -> Iterator[tuple[str, Any]]:  # fmt: skip
    """A run's unit: the stitch at position ``i`` of ``n``, its noise sender (``spec.noise_control``) and its
    random-init control stitches; one row.

    ``source``: the models (``a``, ``b``, ``controls`` pairs; loaded here, packages from another process)
    and the data.
    """
    def model(m: LoadedModel | ModelPackage) -> LoadedModel:
        return m.unpack() if isinstance(m, ModelPackage) else m

    a, b, data = model(source["a"]), model(source["b"]), source["data"]
    cut = pair[0]
    steps = 1 + spec.noise_control + len(source["controls"])
    yield "progress", (0.0, f"position {i + 1}/{n}: {cut.name}")
    stitched, sender = _stitch_at(spec, context, a, b, pair, data, spec.simplicity, gaps=True)
    row = {"position": cut.name, "depth": round(cut.depth, 4), **stitched, "control": []}
    if spec.noise_control:  # right after the stitch: it reuses A's activations (their scale) and B's fit targets
        yield "progress", (1 / steps, f"position {i + 1}/{n}: {cut.name} (noise sender)")
        row["noise_sender"] = _noise_at(spec, context, pair, sender, data)
    del sender
    for k, (ra, rb) in enumerate(source["controls"]):
        done = 1 + spec.noise_control + k
        yield "progress", (done / steps, f"position {i + 1}/{n}: {cut.name} (random-init control {k + 1})")
        row["control"].append(_stitch_at(spec, context, model(ra), model(rb), pair, data, False)[0])
    yield "cells", [row]
