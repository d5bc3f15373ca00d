"""What an assemble worker runs: the parts of a pair (prefix, suffix, data), one sender's cells
(:func:`sender_unit`), and the plan and checks before a run."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from stitchcore.backends import UnitContext
from stitchcore.cuts import Cut, coarse_cuts, get_cut, list_cuts, split
from stitchcore.data.images import ImageDataset
from stitchcore.experiments.assemble.spec import (
    CLS_SAMPLES,
    COARSE,
    EVAL_BATCH,
    AssembleSpec,
    recipe_name,
)
from stitchcore.experiments.dataset_check import check_head_classes, load_pair, pair_dataset
from stitchcore.measures.intervals import mean_ci, pack_outcomes
from stitchcore.models.loaded import LoadedModel
from stitchcore.stitching.activations import collect
from stitchcore.stitching.adapters import (
    AdapterSpec,
    build_adapter,
    compatibility,
    larger_map_refusal,
)
from stitchcore.stitching.evaluate import (
    ClassifierScore,
    count_params,
    module_flops,
    score_logits,
)
from stitchcore.stitching.train import (
    AdapterTargets,
    TrainKnobs,
    recalibrate_batchnorm,
    train_adapter,
    train_classifier,
)
from stitchcore.store.results import Store

# ---------------------------------------------------------------------------- parts


def default_cuts(cuts: list[Cut]) -> list[Cut]:
    """The default cut set of one model: COARSE cuts spread over its feature maps and token cuts (vector
    cuts after pooling only take vectors: a linear probe, not an assembled network), all cuts if it has none.

    >>> from types import SimpleNamespace as C
    >>> cuts = [C(name=f"b{i}", layout="map", depth=i / 8) for i in range(6)] + [C(name="pool", layout="vector", depth=1)]
    >>> [c.name for c in default_cuts(cuts)]
    ['b0', 'b2', 'b5']
    """
    spatial = [c for c in cuts if c.layout != "vector"]
    return coarse_cuts(spatial or cuts, COARSE)


def _cuts(m: LoadedModel, names: tuple[str, ...] | None) -> list[Cut]:
    """The named cuts (aliases resolved, CutError for an unknown one) in execution order, or the default set."""
    every = list_cuts(m)
    if names is None:
        return default_cuts(every)
    picked = {get_cut(m, n).name for n in names}
    return [c for c in every if c.name in picked]


@dataclass
class _Parts:
    """Everything a run reuses across cells: models, data, cuts, B's suffixes and their costs."""

    a: LoadedModel
    b: LoadedModel
    data: ImageDataset
    senders: list[Cut]
    receivers: list[Cut]
    n_train: int
    n_test: int
    suffixes: dict[str, nn.Module]  # receiver name -> suffix_B (frozen, eval)
    suffix_cost: dict[str, tuple[int, int]]  # receiver name -> (params, FLOPs per example)
    receiver_cls: dict[str, torch.Tensor] = field(default_factory=dict)  # receiver name -> B's mean class token [D]


def _prepare(spec: AssembleSpec, store: Store) -> _Parts:
    a, b = load_pair(spec, store, input_kind="image", hint="assemble joins image classifiers")
    data = pair_dataset(spec, a, b)
    check_head_classes(b, data, "B")
    senders, receivers = _cuts(a, spec.senders), _cuts(b, spec.receivers)
    n_train = len(data.labels("train")) if spec.max_train is None else min(spec.max_train, len(data.labels("train")))
    n_test = len(data.labels("test")) if spec.max_test is None else min(spec.max_test, len(data.labels("test")))
    return _Parts(a, b, data, senders, receivers, n_train, n_test, {}, {})


def assemble_plan(spec: AssembleSpec, a: LoadedModel, b: LoadedModel) -> tuple[list[Cut], list[tuple[Cut, Cut,
                                                                                                   AdapterSpec]]]:
    """A's sender cuts, and the (sender, receiver, recipe) cells that train an adapter: those an adapter of
    the recipe can join, one per distinct adapter (a recipe building the same one as another is a copy)."""
    senders, receivers = _cuts(a, spec.senders), _cuts(b, spec.receivers)
    trained, seen = [], set()
    for s in senders:
        for r in receivers:
            for recipe in spec.recipes():
                if compatibility(s, r, recipe) is None:
                    key = (s.name, r.name, recipe.kind, recipe.norm, repr(build_adapter(recipe, s, r).plan))
                    if key not in seen:
                        seen.add(key)
                        trained.append((s, r, recipe))
    return senders, trained


def check_assemble(spec: AssembleSpec, store: Store) -> None:
    """Everything the run checks before its first cell: models, cut names, data and B's head."""
    _prepare(spec, store)


def _forward_cost(m: LoadedModel) -> tuple[int, int]:
    """(parameters, FLOPs per example) of a whole model on its model-input example."""
    return count_params(m.model, trainable_only=False), module_flops(m.model, m.example_input(1))


def _scored(score: ClassifierScore, seed: int, key: str = "accuracy") -> dict[str, Any]:
    """``{key: accuracy, key_ci: its 95% interval over the test images}`` of a score (``correct`` [N])."""
    return {key: score["accuracy"], f"{key}_ci": list(mean_ci(score.correct, seed=seed))}


@torch.no_grad()
def _base_score(m: LoadedModel, parts: _Parts, device: torch.device) -> ClassifierScore:
    model = m.model.to(device).eval()
    logits = [model(x).float().cpu() for x, _ in parts.data.model_batches("test", EVAL_BATCH, m.preprocess, device,
                                                                           limit=parts.n_test)]  # fmt: skip
    return score_logits(torch.cat(logits), parts.data.labels("test")[: parts.n_test], parts.data.num_classes)


def _suffix(parts: _Parts, r: Cut, device: torch.device) -> nn.Module:
    """B after the receiver cut (split once per receiver), frozen and in eval mode."""
    if r.name not in parts.suffixes:
        _, suffix = split(parts.b, r)
        suffix.to(device).eval()
        example = torch.zeros(1, *r.shape, device=device)
        parts.suffixes[r.name] = suffix
        parts.suffix_cost[r.name] = (count_params(suffix, trainable_only=False), module_flops(suffix, example))
    return parts.suffixes[r.name]


@torch.no_grad()
def _receiver_cls(parts: _Parts, r: Cut, device: torch.device, lead: int = 1) -> torch.Tensor:
    """B's own class token at the receiving cut, averaged over the first CLS_SAMPLES training images: [D]
    ([lead, D] for a receiver that leads with class and register tokens; computed once per receiver)."""
    if r.name not in parts.receiver_cls:
        prefix, _ = split(parts.b, r)
        prefix.to(device).eval()
        h = collect(prefix, parts.data, parts.b.preprocess, "train", device=device,
                    limit=min(CLS_SAMPLES, parts.n_train))  # fmt: skip
        parts.receiver_cls[r.name] = h[:, 0].float().mean(0) if lead == 1 else h[:, :lead].float().mean(0)
    return parts.receiver_cls[r.name]


class _Assembled(nn.Module):
    """prefix_A -> adapter -> suffix_B as one module: A's model input [B, ...] -> logits [B, K]."""

    def __init__(self, prefix: nn.Module, adapter: nn.Module, suffix: nn.Module) -> None:
        super().__init__()
        self.prefix, self.adapter, self.suffix = prefix, adapter, suffix

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.suffix(self.adapter(self.prefix(x)))


def _finetune(spec: AssembleSpec, ctx: UnitContext, parts: _Parts, prefix: nn.Module, adapter: nn.Module,
              suffix: nn.Module) -> ClassifierScore:  # fmt: skip
    """Copies of prefix, adapter and suffix trained together on the task; the result's test score."""
    net = _Assembled(copy.deepcopy(prefix), copy.deepcopy(adapter), copy.deepcopy(suffix)).to(ctx.device)
    for p in net.parameters():
        p.requires_grad_(True)
    y = parts.data.labels("train")[: parts.n_train]
    gen = torch.Generator().manual_seed(spec.seed)
    steps = -(-parts.n_train // spec.batch_size)

    def batches(epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:  # one batch of images at a time
        order = torch.randperm(parts.n_train, generator=gen)
        for i in range(0, parts.n_train, spec.batch_size):
            idx = order[i : i + spec.batch_size]
            yield parts.data.model_inputs("train", idx, parts.a.preprocess, ctx.device), y[idx]

    train_classifier(net, batches, steps, optimizer="adamw", lr=spec.finetune_lr, weight_decay=spec.weight_decay,
                     momentum=0.9, epochs=spec.finetune_epochs, device=ctx.device,
                     check_cancel=ctx.check_cancel)  # fmt: skip
    net.eval()
    with torch.no_grad():
        logits = torch.cat([net(x).float().cpu() for x, _ in parts.data.model_batches(
            "test", EVAL_BATCH, parts.a.preprocess, ctx.device, limit=parts.n_test)])  # fmt: skip
    return score_logits(logits, parts.data.labels("test")[: parts.n_test], parts.data.num_classes)


def _cell_key(sender: str, receiver: str, recipe: str) -> str:
    return f"{sender}|{receiver}|{recipe}"


def _blank(s: Cut, r: Cut, recipe: AdapterSpec) -> dict[str, Any]:
    return {"sender": s.name, "receiver": r.name, "sender_layout": s.layout, "receiver_layout": r.layout,
            "sender_depth": round(s.depth, 4), "receiver_depth": round(r.depth, 4), "recipe": recipe_name(recipe),
            "adapter": recipe.kind, "norm": recipe.norm, "resample": recipe.resample, "accuracy": None,
            "accuracy_ci": None, "penalty": None, "penalty_ci": None, "flops": None, "macs": None, "params": None,
            "adapter_params": None, "adapter_flops": None, "adapter_macs": None, "finetune_accuracy": None,
            "skipped_reason": None, "same_as": None}  # fmt: skip


def _sender_cells(spec: AssembleSpec, ctx: UnitContext, parts: _Parts, s: Cut,
                  todo: list[tuple[Cut, AdapterSpec]]) -> Iterator[dict]:  # fmt: skip
    """Every pending (receiver, recipe) cell of sender ``s``, in ``todo`` order, from one pass of A's prefix."""
    device = ctx.device
    prefix, _ = split(parts.a, s)
    prefix.to(device).eval()
    prefix_cost = (count_params(prefix, trainable_only=False), module_flops(prefix, parts.a.example_input(1).to(device)))
    acts = {"device": device, "batch_size": EVAL_BATCH, "check_cancel": ctx.check_cancel}
    h_train = collect(prefix, parts.data, parts.a.preprocess, "train", limit=parts.n_train, **acts)  # [N, *s.shape]
    h_test = collect(prefix, parts.data, parts.a.preprocess, "test", limit=parts.n_test, **acts)
    y_train = parts.data.labels("train")[: parts.n_train]
    y_test = parts.data.labels("test")[: parts.n_test]
    built = {}  # (receiver, adapter repr) -> the cell that trained it
    for r, recipe in todo:
        ctx.check_cancel()
        cell = _blank(s, r, recipe)
        why = compatibility(s, r, recipe)
        if why is not None:
            yield {**cell, "skipped_reason": why}
            continue
        torch.manual_seed(spec.seed)
        adapter = build_adapter(recipe, s, r)
        plan_key = (r.name, recipe.kind, recipe.norm, repr(adapter.plan))
        if plan_key in built:  # the same adapter under another recipe name (e.g. no resampling needed)
            twin = built[plan_key]
            yield {**twin, **{k: cell[k] for k in ("recipe", "resample")}, "same_as": twin["recipe"]}
            continue
        suffix = _suffix(parts, r, device)
        if (why := larger_map_refusal(suffix, adapter, device)) is not None:
            yield {**cell, "skipped_reason": why}
            continue
        if adapter.cls_fixed is not None:
            adapter.set_receiver_cls(_receiver_cls(parts, r, device, int(adapter.plan.receiver_cls)))
        adapter.to(device)
        train_adapter(adapter, suffix, h_train, AdapterTargets(labels=y_train), objective={"task": 1.0},
                      knobs=TrainKnobs.of(spec), device=device, check_cancel=ctx.check_cancel)  # fmt: skip
        recalibrate_batchnorm(adapter, h_train, device, batch_size=EVAL_BATCH)
        with torch.no_grad():
            logits = torch.cat([suffix(adapter(h_test[i : i + EVAL_BATCH].to(device))).float().cpu()
                                for i in range(0, len(h_test), EVAL_BATCH)])  # fmt: skip
        ad_params = count_params(adapter, trainable_only=False)
        example = torch.zeros(1, *s.shape, device=device)  # [1, *sender.shape]
        ad_flops = module_flops(adapter, example)
        suffix_params, suffix_flops = parts.suffix_cost[r.name]
        if adapter.plan.out_grid is not None:  # No Downsample: B's rest runs on the larger map
            suffix_flops = module_flops(nn.Sequential(adapter, suffix), example) - ad_flops
        flops = prefix_cost[1] + ad_flops + suffix_flops
        score = score_logits(logits, y_test, parts.data.num_classes)
        cell.update(**_scored(score, spec.seed), outcomes=pack_outcomes(score.correct), adapter_params=ad_params,
                    adapter_flops=ad_flops, adapter_macs=ad_flops // 2, params=prefix_cost[0] + ad_params
                    + suffix_params, flops=flops, macs=flops // 2, rescale=spec.rescale)  # fmt: skip
        if spec.finetune_baseline:
            cell.update(_scored(_finetune(spec, ctx, parts, prefix, adapter, suffix), spec.seed, "finetune_accuracy"))
        built[plan_key] = cell
        yield cell


def sender_unit(spec: AssembleSpec, source: _Parts | dict, s: Cut, todo: list[tuple[Cut, AdapterSpec]],
                context: UnitContext) -> Iterator[tuple[str, Any]]:  # fmt: skip
    """A run's unit: sender ``s``'s pending cells, each yielded as it is done (locally ``source`` is the run's
    parts; elsewhere the models come as packages and B's suffixes are split in the worker)."""
    parts = source if isinstance(source, _Parts) else _Parts(
        source["a"].unpack().to(context.device), source["b"].unpack().to(context.device), source["data"], [], [],
        source["n_train"], source["n_test"], {}, {})  # whole, then split
    yield "progress", (0.0, f"A[{s.name}] into B: {len(todo)} cell(s)")
    for i, cell in enumerate(_sender_cells(spec, context, parts, s, todo)):
        yield "cells", [cell]
        if i + 1 < len(todo):
            yield "progress", ((i + 1) / len(todo), f"A[{s.name}] into B[{todo[i + 1][0].name}]")


