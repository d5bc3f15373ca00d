"""The pair setup shared by the three LM kinds: load A and B, take them apart on private copies
(:func:`stitchcore.lm.parts.lm_parts`), encode the corpus with their shared vocabulary, score and
sample A and B (:func:`setup_pair`; :func:`setup_in_worker` again in a cluster task); the checks'
first step (:func:`pair_shapes`); and one trained stitch from A's position ``i`` to B's ``j``
(:func:`stitch_once`, for ``lmstitch`` and ``lmdepth``; :class:`UnitRun` is what it reports to
inside a depth sweep's unit).  Bottom: :mod:`~stitchcore.experiments.lm.specs`; imported by the kind
modules and their estimators, never by anything outside :mod:`stitchcore.experiments`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from stitchcore.backends import UnitContext
from stitchcore.data.text import check_text
from stitchcore.experiments._registry import RunContext
from stitchcore.experiments.dataset_check import load_pair
from stitchcore.experiments.lm.specs import DepthSpec, LMStitchSpec, MergeSpec
from stitchcore.lm.evaluate import (
    LMData,
    LMScore,
    eval_windows,
    lm_data,
    lm_loss,
    loss_ci,
    loss_penalty,
    loss_penalty_ci,
    sample_text,
)
from stitchcore.lm.parts import (
    ComposedLM,
    LMParts,
    TokenCodec,
    TokenwiseAdapter,
    build_stitch,
    check_same_vocab,
    codec_of,
    lm_parts,
    lm_shape,
    make_token_adapter,
)
from stitchcore.lm.train import TUNE_WINDOWS, Convergence, split_tune, train_lm_adapter
from stitchcore.models.loaded import LoadedModel
from stitchcore.stitching.fits import fit_adapter
from stitchcore.stitching.train import parse_objective

__all__ = ["FIT_BATCHES", "NOT_LM_HINT", "LMSetup", "UnitRun", "common_summary", "joined_scores", "pair_shapes",
           "receiver_block", "sample_of", "setup_in_worker", "setup_pair", "stitch_once", "stopped_steps", "whole_model"]

NOT_LM_HINT = "use the Stitch page / stitch verb"  # what an image model in an LM run should use instead
FIT_BATCHES = 8  # training batches whose tokens feed the least-squares start of an adapter


@dataclass
class LMSetup:
    """Both models taken apart, the shared data and the base scores."""

    a: LMParts
    b: LMParts
    data: LMData
    windows: torch.Tensor  # int64 [n, T+1] validation windows, the same for every model
    block: int  # T, the training / scoring context
    base: dict[str, dict[str, Any]]  # {"a": {"loss", "perplexity", "accuracy", "loss_ci"}, "b": {...}}
    samples: dict[str, str]  # "a", "b" -> generated text
    device: torch.device
    loaded: tuple[LoadedModel, LoadedModel] | None = None  # A and B as loaded (what a cluster task gets sent)
    # "a", "b" -> float64 [n], each window's mean loss: the base side of the paired penalty intervals
    # (empty where a cluster task was shipped none: its points then carry no penalty interval)
    base_windows: dict[str, torch.Tensor] = field(default_factory=dict)
    seed: int = 0  # the bootstrap's seed (the spec's): the same windows resampled for every model


def _parts_to(device: torch.device, *parts: LMParts) -> None:
    """Move the taken-apart models' embeddings, heads and blocks to ``device`` (they are copies: in place)."""
    for p in parts:
        for mod in (p.embed, p.head, *p.blocks):
            mod.to(device)


def whole_model(p: LMParts, role: str) -> ComposedLM:
    layout = [f"{role}.wte", f"{role}.wpe", *[f"{role}.h.{k}" for k in range(p.n_layer)], f"{role}.ln_f",
              f"{role}.lm_head"]
    return ComposedLM(p.embed, p.blocks, p.head, layout, p.context)


def setup_pair(spec: MergeSpec | LMStitchSpec | DepthSpec, ctx: RunContext,
               check: Callable[[LMParts, LMParts], object] | None = None) -> LMSetup:
    """Load, take apart (copies), check the vocabularies (and ``check(a, b)``: positions), encode the
    text, score A and B, sample them."""
    ctx.progress(0.0, "loading models")
    la, lb = load_pair(spec, ctx.store, input_kind="tokens", hint=NOT_LM_HINT)
    a, b = lm_parts(la), lm_parts(lb)
    check_same_vocab(a.codec, b.codec, "joined")
    if check is not None:
        check(a, b)  # bad positions fail before any scoring
    _parts_to(ctx.device, a, b)
    text = spec.text or la.dataset or lb.dataset or "pydoc"
    ctx.progress(0.02, f"encoding {text}")
    data = lm_data(text, a.codec)
    block = min(la.input_shape[0], lb.input_shape[0], a.context, b.context)
    windows = eval_windows(data.val, block, spec.eval_windows)
    base, samples, per_window = {}, {}, {}
    for role, p in (("a", a), ("b", b)):
        model = whole_model(p, role.upper())
        score = lm_loss(model, windows, ctx.device, ctx.check_cancel)
        base[role] = {**score, "loss_ci": loss_ci(score.per_window, spec.seed)}  # 95%, the windows resampled
        per_window[role] = score.per_window
        samples[role] = sample_of(model, a, data, spec, block, ctx.device)
    ctx.progress(0.05, f"A: loss {base['a']['loss']:.3f}, B: loss {base['b']['loss']:.3f}", {})
    return LMSetup(a, b, data, windows, block, base, samples, ctx.device, (la, lb), per_window, spec.seed)


def setup_in_worker(shipped: dict[str, Any], device: torch.device) -> LMSetup:
    """The setup again in a cluster task, from the driver's packages, encoded text and base scores."""
    a, b = lm_parts(shipped["a"].unpack()), lm_parts(shipped["b"].unpack())
    _parts_to(device, a, b)
    return LMSetup(a, b, shipped["data"], shipped["windows"], shipped["block"], shipped["base"], {}, device,
                   base_windows=shipped.get("base_windows") or {}, seed=shipped.get("seed", 0))


def joined_scores(s: LMSetup, head: str, score: LMScore) -> dict[str, Any]:
    """A joined model's ``score`` with its loss penalty against the base model ``head`` ("a" or "b") and their
    95% intervals: ``loss_ci`` (its windows resampled) and ``loss_penalty_ci`` (paired with the base's)."""
    out = {**score, "loss_ci": loss_ci(score.per_window, s.seed),
           "loss_penalty": loss_penalty(s.base[head]["loss"], score["loss"])}
    if head in s.base_windows:
        out["loss_penalty_ci"] = loss_penalty_ci(s.base_windows[head], score.per_window, s.seed)
    return out


def sample_of(model: nn.Module, p: LMParts, data: LMData, spec, block: int, device: torch.device) -> str:
    if spec.sample_tokens <= 0:
        return ""
    return sample_text(model, p.codec, data.prompt, spec.sample_tokens, block, device, seed=spec.seed)


def common_summary(s: LMSetup, spec) -> dict:
    return {
        "base": s.base,
        "samples": dict(s.samples),
        "prompt": s.data.prompt,
        "text": s.data.text,
        "block_size": s.block,
        "eval_tokens": int(s.windows.shape[0] * (s.windows.shape[1] - 1)),
        "n_layer": {"a": s.a.n_layer, "b": s.b.n_layer},
        "width": {"a": s.a.width, "b": s.b.width},
        "vocab": s.a.codec.describe(),
        "penalty_sign": "loss_penalty = (L_base - L) / L_base; negative = worse than the base model",
    }


def pair_shapes(spec: MergeSpec | LMStitchSpec | DepthSpec, store: Any,
                across: Callable[[TokenCodec, TokenCodec], None] | None = None) -> tuple[dict, dict]:
    """What every LM run checks first, without copying or scoring anything: both models load, both are
    language models, they share one vocabulary (or, with ``across``, tokenize differently and pass its check).
    Returns A's and B's ``lm_shape``, each with ``"cross"``: whether the vocabularies differ."""
    la, lb = load_pair(spec, store, input_kind="tokens", hint=NOT_LM_HINT)
    ca, cb = codec_of(la), codec_of(lb)
    cross = ca.fingerprint != cb.fingerprint or ca.size != cb.size
    if cross and across is not None:
        across(ca, cb)
    else:
        check_same_vocab(ca, cb, "joined")
    if spec.text:  # a missing or empty --text file is refused here, not stored as a failed run
        check_text(spec.text)
    return {**lm_shape(la), "cross": cross}, {**lm_shape(lb), "cross": cross}


def receiver_block(i: int, n_a: int, n_b: int) -> int:
    """B's position matching A's split ``i`` (the same relative depth when the depths differ)."""
    return i if n_a == n_b else round(i * n_b / max(n_a, 1))


def stitch_once(s: LMSetup, spec: LMStitchSpec | DepthSpec, ctx: RunContext | UnitRun, i: int, j: int, head: str,
                head_at: int | None = None, step0: int = 0, span: tuple[float, float] = (0.1, 0.9),
                log_every: int = 5) -> tuple[ComposedLM, dict]:
    """Build, fit (lstsq) and train one stitch from A's position ``i`` to B's ``j``; returns (model, scores).

    With ``spec.holds_out`` the last part of the train text is held out (:func:`stitchcore.lm.train.split_tune`):
    the start (``spec.start`` "best": the adapter's init or the identity) and the stop (``spec.until``
    "converged") are chosen on it, never on the validation windows the scores are read on.
    """
    torch.manual_seed(spec.seed)
    adapter = make_token_adapter(spec.adapter, s.a, i, s.b, j, spec.mlp_hidden)
    model = build_stitch(s.a, s.b, i, j, adapter, head, head_at)
    fit_ids, tune = s.data.train, None
    if spec.holds_out:
        fit_ids, tune_ids = split_tune(s.data.train)
        tune = eval_windows(tune_ids, s.block, TUNE_WINDOWS, seed=4321)
    residual = None
    if spec.adapter.init in ("lstsq", "procrustes"):
        batches = [x for x, _ in _train_batches(fit_ids, s.block, spec, FIT_BATCHES)]
        pairs = ((s.a.residual(x.to(s.device), i).flatten(0, 1), s.b.residual(x.to(s.device), j).flatten(0, 1))
                 for x in batches)
        residual = fit_adapter(adapter.inner, pairs, method=spec.adapter.init)
    adapter.to(s.device)

    def held_out() -> float:
        return lm_loss(model, tune, s.device, ctx.check_cancel)["loss"]

    started = _best_start(adapter, held_out) if spec.start == "best" else spec.adapter.init
    start = lm_loss(model, s.windows, s.device, ctx.check_cancel)
    objective = parse_objective(spec.objective)
    teacher = whole_model(s.a if head == "a" else s.b, head.upper()) if "kd" in objective else None
    lo, hi = span

    def on_step(step: int, total: int, metrics: dict[str, float]) -> None:
        ctx.progress(lo + (hi - lo) * step / total, f"training adapter {i}->{j} (head {head}): step {step}/{total}")
        if step % log_every == 0 or step == total:
            ctx.log(step0 + step, {"loss": metrics["loss"]})

    until = Convergence(held_out, spec.check_every, spec.patience, spec.tol) if spec.converges else None
    losses = train_lm_adapter(
        model, i, adapter, fit_ids, block_size=s.block, objective=objective, steps=spec.steps,
        batch_size=spec.batch_size, lr=spec.lr, weight_decay=spec.weight_decay, seed=spec.seed, device=s.device,
        receiver=lambda x: s.b.residual(x, j), teacher=teacher, on_step=on_step, check_cancel=ctx.check_cancel,
        until=until,
    )
    score = lm_loss(model, s.windows, s.device, ctx.check_cancel)
    params = sum(p.numel() for p in adapter.parameters() if p.requires_grad)
    result = {
        **joined_scores(s, head, score), "start_loss": start["loss"],
        "penalty_base": head, "params": int(params), "steps": len(losses),
        "lstsq_residual": None if residual is None else round(float(residual), 6),
        "final_train_loss": round(losses[-1], 6) if losses else None, "start_from": started,
    }
    if until is not None:
        result["held_out"] = {"loss": round(until.best, 6), "best_step": until.best_step,
                              "stopped_at": until.stopped_at, "converged": until.converged(spec.steps),
                              "checks": [[k, round(v, 6)] for k, v in until.history]}  # fmt: skip
    return model, result


def stopped_steps(summary: dict[str, Any]) -> list[int]:
    """The steps each converged stitch of a stored lmstitch or lmdepth summary trained (``held_out.stopped_at``,
    written by :func:`stitch_once`; a depth sweep's are per point).

    >>> stopped_steps({"held_out": {"stopped_at": 300}}), stopped_steps({"points": [{"held_out": {"stopped_at": 650}}, {}]})
    ([300], [650])
    """
    held = [summary.get("held_out"), *(p.get("held_out") for p in summary.get("points") or [] if isinstance(p, dict))]
    return [h["stopped_at"] for h in held if isinstance(h, dict) and isinstance(h.get("stopped_at"), int)]


def _best_start(adapter: TokenwiseAdapter, held_out: Callable[[], float]) -> str:
    """Keep the adapter's start or switch it to the identity, whichever has the lower held-out loss.

    The identity is a candidate where the shapes allow it (D_A == D_B and a kind with an identity).
    Returns the start kept: the adapter spec's init or ``"identity"``.
    """
    inner = adapter.inner
    init = inner.spec.init
    if init == "identity" or not inner.core.identity_init or inner.plan.c_in != inner.plan.c_out:
        return init
    kept = held_out()
    state = copy.deepcopy(adapter.state_dict())
    with torch.no_grad():
        inner.core.init_identity()
    if held_out() < kept:
        return "identity"
    adapter.load_state_dict(state)
    return init


def _train_batches(ids: torch.Tensor, block: int, spec, n: int):
    from stitchcore.data.text import lm_batches

    return lm_batches(ids, block, spec.batch_size, spec.seed + 7919, n)


class UnitRun:
    """What :func:`stitch_once` needs from a run, inside a unit: progress (live where the backend can show
    it), metric points (buffered; the unit yields them) and the cancel check."""

    def __init__(self, context: UnitContext) -> None:
        self.context = context
        self.points: list[tuple[int, dict[str, float]]] = []
        self.check_cancel = context.check_cancel

    def progress(self, fraction: float, message: str = "", metrics: dict[str, float] | None = None) -> None:
        self.context.report(fraction, message)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        if not self.context.metrics(step, dict(metrics)):  # locally the point is stored at once (live curve)
            self.points.append((step, dict(metrics)))

    def take(self) -> list[tuple[int, dict[str, float]]]:
        out, self.points = self.points, []
        return out
