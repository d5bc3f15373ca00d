"""Experiments ``merge``, ``lmstitch`` and ``lmdepth``: GPT-style models joined by block substitution
(merge, no new parameters) or through an adapter (stitch), scored by validation loss.

Every run loads A and B, takes them apart on private copies (:func:`stitchcore.lm.parts.lm_parts`),
encodes the corpus with their shared vocabulary, and scores A, B and the joined model C on
the same validation windows.  The loss penalty ``(L_base - L_C) / L_base`` is against the
model whose head C uses (``penalty_base``); negative = C is worse (see :mod:`stitchcore.lm.evaluate`).
Each run also stores a short sample from every model, generated at a fixed seed.  A depth sweep
logs each finished point as the metric series ``penalty:{mode}:{head}`` (step = split), which
:func:`partial_points` reads back while it runs.

Positions are residual-stream positions (see :mod:`stitchcore.lm.parts`): ``k`` = after ``k``
blocks, 0 = right after the embeddings.  Block ranges are half-open: ``start=1, end=4``
substitutes blocks 1, 2 and 3.

>>> MergeSpec(a="zoo:gpt-pydoc-s0-adamw", b="zoo:gpt-pydoc-s1-adamw", start=2).label()
'merge zoo:gpt-pydoc-s0-adamw <- zoo:gpt-pydoc-s1-adamw blocks [2, end), head a'
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from safetensors.torch import save
from torch import nn

from stitchcore.backends import Unit, UnitContext, cells_per_node
from stitchcore.errors import AdapterError, CutError, StitchError
from stitchcore.experiments._registry import RunContext, register_experiment
from stitchcore.experiments._spec import check_at_least, check_choice, check_positive, spec_from_dict
from stitchcore.experiments.estimate import (
    Estimate,
    EstimateContext,
    calibrated,
    estimate_from,
    ms,
    per_step,
    timed,
    where,
)
from stitchcore.lm.evaluate import LMData, eval_windows, lm_data, lm_loss, loss_penalty, sample_text
from stitchcore.lm.parts import (
    ComposedLM,
    LMParts,
    TokenwiseAdapter,
    build_merge,
    build_stitch,
    check_same_vocab,
    codec_of,
    cut_name,
    lm_parts,
    lm_shape,
    make_token_adapter,
    merge_layout,
    stitch_layout,
)
from stitchcore.lm.train import train_lm_adapter
from stitchcore.models.loaded import LoadedModel
from stitchcore.models.package import pack_model
from stitchcore.models.sources import load_model
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.stitching.fits import fit_adapter
from stitchcore.stitching.train import parse_objective

__all__ = ["LM_ADAPTER", "estimate_depth", "estimate_lm", "estimate_lm_stitch", "estimate_merge", "MODES", "DepthSpec", "LMSetup", "LMStitchSpec", "MergeSpec", "check_depth", "check_lm_stitch",
           "check_merge", "depth_unit", "partial_points", "run_depth", "run_lm_stitch", "run_merge", "setup_pair"]

log = logging.getLogger(__name__)

FIT_BATCHES = 8  # training batches whose tokens feed the least-squares start of an adapter
ADAPTER_WEIGHTS = "adapter.safetensors"
PENALTY_SERIES = "penalty"  # depth sweeps log each point as series penalty:{mode}:{head} (read by partial_points)

MODES = ("merge", "stitch")
# Per-token linear map, least-squares start, no BatchNorm (train-mode BN would mix a batch's
# tokens, future positions included).
LM_ADAPTER = AdapterSpec(kind="linear", norm="none", resample="none", init="lstsq")


def _adapter(value: AdapterSpec | dict) -> AdapterSpec:
    return AdapterSpec.from_dict(value) if isinstance(value, dict) else value


@dataclass(frozen=True)
class _Eval:
    """Fields shared by every LM spec (scoring and samples)."""

    text: str | None = None  # corpus (text.load_text); None: A's training corpus, else pydoc
    eval_windows: int = 128  # validation windows of A's context length, the same for A, B and C
    sample_tokens: int = 160  # tokens generated per model for the side-by-side samples (0 = none)
    seed: int = 0  # sampling and adapter-training seed


@dataclass(frozen=True)
class MergeSpec(_Eval):
    """One merge: A with B's blocks ``start .. end-1``; no new parameters."""

    a: str = ""  # ModelRef of the base model A
    b: str = ""  # ModelRef of the donor B
    start: int = 0  # first substituted block
    end: int | None = None  # one past the last substituted block; None = to the last block
    head: str = "a"  # whose ln_f + lm_head: "a" preserves A's head (A.wte, A.wpe, A.ln_f), "b" uses B's
    embed: str = "a"  # whose wte + wpe read the input

    def __post_init__(self) -> None:
        if not self.a or not self.b:
            raise StitchError("a merge needs two model refs, a and b")
        check_choice("head", self.head, ("a", "b"))
        check_choice("embed", self.embed, ("a", "b"))
        if self.start < 0 or (self.end is not None and self.end < self.start):
            raise StitchError(f"block range [{self.start}, {self.end}) is empty or negative; need 0 <= start <= end")
        if self.eval_windows < 1:
            raise StitchError("eval_windows must be at least 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MergeSpec:
        return spec_from_dict(cls, dict(d))

    def label(self) -> str:
        end = "end" if self.end is None else self.end
        return f"merge {self.a} <- {self.b} blocks [{self.start}, {end}), head {self.head}"


@dataclass(frozen=True)
class _Train:
    """Adapter training fields shared by LM stitches and depth sweeps."""

    adapter: AdapterSpec = field(default_factory=lambda: LM_ADAPTER)
    objective: str = "task"  # task | match | kd | weighted sum "task+0.5*match"
    steps: int = 200  # adapter optimiser steps (0 = the closed-form / initial adapter only)
    batch_size: int = 32  # windows per step
    lr: float = 1e-3  # AdamW, cosine to 0
    weight_decay: float = 0.0
    mlp_hidden: int = 0  # > 0: the "mlp" adapter, linear map + a zero-initialised GELU MLP branch of this width

    def _check_train(self) -> None:
        object.__setattr__(self, "adapter", _adapter(self.adapter))
        parse_objective(self.objective)
        if self.adapter.kind == "identity":
            raise StitchError("an identity adapter is a merge; use mode merge")
        if self.steps < 0 or self.batch_size < 1 or self.mlp_hidden < 0:
            raise StitchError("steps and mlp_hidden must be >= 0 and batch_size >= 1")
        check_positive("lr", self.lr, "typical values 1e-4 .. 1e-2 (default 1e-3)")
        check_at_least("weight_decay", self.weight_decay, 0, "0 turns it off")

    @property
    def adapter_name(self) -> str:
        """linear | lowrank | mlp (as the page and the CLI spell it)."""
        return "mlp" if self.mlp_hidden else self.adapter.kind


@dataclass(frozen=True)
class LMStitchSpec(_Train, _Eval):
    """One LM stitch: A's stream at ``cut_a`` -> adapter -> B from ``cut_b`` (positions)."""

    a: str = ""  # ModelRef of the bottom model A
    b: str = ""  # ModelRef of the top model B
    cut_a: int = 0  # A's residual position i (after i blocks)
    cut_b: int | None = None  # B's position j where B takes over; None = the same as cut_a
    head: str = "b"  # "b": B's head; "a": head-preserving C = A_head(B_{j..h}(S(A_<i)))
    head_at: int | None = None  # head "a": where B's blocks hand back to A's (None = after B's last block)

    def __post_init__(self) -> None:
        if not self.a or not self.b:
            raise StitchError("an LM stitch needs two model refs, a and b")
        check_choice("head", self.head, ("a", "b"))
        if self.head == "b" and self.head_at is not None:
            raise StitchError("head_at is for head 'a' (where A's head takes over); leave it out with head 'b'")
        self._check_train()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["adapter"] = self.adapter.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LMStitchSpec:
        return spec_from_dict(cls, dict(d))

    def label(self) -> str:
        j = self.cut_a if self.cut_b is None else self.cut_b
        return f"lm stitch {self.a}[{self.cut_a}] -> {self.b}[{j}], head {self.head} ({self.adapter_name})"


@dataclass(frozen=True)
class DepthSpec(_Train, _Eval):
    """Penalty over depth: merge and/or stitch at every split, with each head; optional (i, j) heat map.

    Split ``i`` (0 .. L): merge = A's blocks < i, B's blocks >= i; stitch = A's stream at i
    -> adapter -> B from i.  ``head`` "b" uses B's head (base B); "a" keeps A's (base A).
    """

    a: str = ""
    b: str = ""
    modes: tuple[str, ...] = MODES  # which curves: merge, stitch
    heads: tuple[str, ...] = ("a", "b")  # which heads: a (preserved), b
    splits: tuple[int, ...] | None = None  # split positions; None = every one, 0 .. L
    heatmap: bool = False  # also stitch every (i, j) pair with B's head (the heat map)

    def __post_init__(self) -> None:
        if not self.a or not self.b:
            raise StitchError("a depth sweep needs two model refs, a and b")
        for name, values, choices in (("mode", self.modes, MODES), ("head", self.heads, ("a", "b"))):
            object.__setattr__(self, f"{name}s", tuple(values))
            if not values:
                raise StitchError(f"pick at least one {name}")
            for v in values:
                check_choice(name, v, choices)
        if self.splits is not None:
            object.__setattr__(self, "splits", tuple(int(s) for s in self.splits))
        self._check_train()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["adapter"] = self.adapter.to_dict()
        d["modes"], d["heads"] = list(self.modes), list(self.heads)
        d["splits"] = None if self.splits is None else list(self.splits)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DepthSpec:
        return spec_from_dict(cls, dict(d))

    def label(self) -> str:
        extra = " + heat map" if self.heatmap else ""
        return f"LM depth sweep {self.a} / {self.b} ({', '.join(self.modes)}; heads {', '.join(self.heads)}){extra}"


@dataclass
class LMSetup:
    """Both models taken apart, the shared data and the base scores."""

    a: LMParts
    b: LMParts
    data: LMData
    windows: torch.Tensor  # int64 [n, T+1] validation windows, the same for every model
    block: int  # T, the training / scoring context
    base: dict[str, dict[str, float]]  # {"a": {"loss", "perplexity", "accuracy"}, "b": {...}}
    samples: dict[str, str]  # "a", "b" -> generated text
    device: torch.device
    loaded: tuple[LoadedModel, LoadedModel] | None = None  # A and B as loaded (what a cluster task gets sent)


def _parts_to(device: torch.device, *parts: LMParts) -> None:
    """Move the taken-apart models' embeddings, heads and blocks to ``device`` (they are copies: in place)."""
    for p in parts:
        for mod in (p.embed, p.head, *p.blocks):
            mod.to(device)


def _whole(p: LMParts, role: str) -> ComposedLM:
    layout = [f"{role}.wte", f"{role}.wpe", *[f"{role}.h.{k}" for k in range(p.n_layer)], f"{role}.ln_f",
              f"{role}.lm_head"]
    return ComposedLM(p.embed, p.blocks, p.head, layout, p.context)


def setup_pair(spec: MergeSpec | LMStitchSpec | DepthSpec, ctx: RunContext,
               check: Callable[[LMParts, LMParts], object] | None = None) -> LMSetup:
    """Load, take apart (copies), check the vocabularies (and ``check(a, b)``: positions), encode the
    text, score A and B, sample them."""
    ctx.progress(0.0, "loading models")
    la, lb = load_model(spec.a, store=ctx.store), load_model(spec.b, store=ctx.store)
    for m, role in ((la, "A"), (lb, "B")):
        if m.input_kind != "tokens":
            raise StitchError(f"model {role} ({m.ref}) is not a language model; use the Stitch page / stitch verb")
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
    base, samples = {}, {}
    for role, p in (("a", a), ("b", b)):
        model = _whole(p, role.upper())
        base[role] = lm_loss(model, windows, ctx.device, ctx.check_cancel)
        samples[role] = _sample(model, a, data, spec, block, ctx.device)
    ctx.progress(0.05, f"A: loss {base['a']['loss']:.3f}, B: loss {base['b']['loss']:.3f}", {})
    return LMSetup(a, b, data, windows, block, base, samples, ctx.device, (la, lb))


def _setup_in_worker(shipped: dict[str, Any], device: torch.device) -> LMSetup:
    """The setup again in a cluster task, from the driver's packages, encoded text and base scores."""
    a, b = lm_parts(shipped["a"].unpack()), lm_parts(shipped["b"].unpack())
    _parts_to(device, a, b)
    return LMSetup(a, b, shipped["data"], shipped["windows"], shipped["block"], shipped["base"], {}, device)


def _sample(model: nn.Module, p: LMParts, data: LMData, spec, block: int, device: torch.device) -> str:
    if spec.sample_tokens <= 0:
        return ""
    return sample_text(model, p.codec, data.prompt, spec.sample_tokens, block, device, seed=spec.seed)


def _common(s: LMSetup, spec) -> dict:
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


# ------------------------------------------------------------------------------------ checks


def _pair_shapes(spec: MergeSpec | LMStitchSpec | DepthSpec, store: Any) -> tuple[dict, dict]:
    """What every LM run checks first, without copying or scoring anything: both models load, both are
    language models, they share one vocabulary.  Returns A's and B's ``lm_shape``."""
    la, lb = load_model(spec.a, store=store), load_model(spec.b, store=store)
    for m, role in ((la, "A"), (lb, "B")):
        if m.input_kind != "tokens":
            raise StitchError(f"model {role} ({m.ref}) is not a language model; use the Stitch page / stitch verb")
    check_same_vocab(codec_of(la), codec_of(lb), "joined")
    return lm_shape(la), lm_shape(lb)


def _merge_end(spec: MergeSpec, n_a: int, n_b: int) -> int:
    """The merge's block range end, checked with its start (CutError when out of range)."""
    end = min(n_a, n_b) if spec.end is None else spec.end
    merge_layout(n_a, n_b, spec.start, end, spec.head, spec.embed)
    return end


def check_merge(spec: MergeSpec, store: Any) -> None:
    """Before anything is stored: the models, their vocabulary, the block range, equal widths (a merge has
    no adapter)."""
    sa, sb = _pair_shapes(spec, store)
    _merge_end(spec, sa["n_layer"], sb["n_layer"])
    if sa["width"] != sb["width"]:
        raise AdapterError(f"merge substitutes blocks without an adapter, so widths must be equal: A has "
                           f"D={sa['width']}, B has D={sb['width']}; use a stitch (an adapter maps D_A -> D_B)")


def check_lm_stitch(spec: LMStitchSpec, store: Any) -> None:
    """Before anything is stored: the models, their vocabulary, positions i and j (and head_at), equal widths
    for A's head."""
    sa, sb = _pair_shapes(spec, store)
    j = spec.cut_a if spec.cut_b is None else spec.cut_b
    stitch_layout(sa["n_layer"], sb["n_layer"], spec.cut_a, j, spec.head, spec.head_at)
    if spec.head == "a" and sa["width"] != sb["width"]:
        raise AdapterError(f"head preservation runs A's head on B's stream, so widths must be equal (A: "
                           f"D={sa['width']}, B: D={sb['width']}); use head b")


def _depth_splits(spec: DepthSpec, n_a: int) -> None:
    if bad := [k for k in spec.splits or () if not 0 <= k <= n_a]:
        raise CutError(f"splits {bad} are outside 0..{n_a} (A has {n_a} blocks)")


def _depth_tasks(spec: DepthSpec, n_a: int, n_b: int, width_a: int, width_b: int,
                 splits: list[int]) -> tuple[list[tuple[str, str, int]], dict[str, str]]:
    """The (mode, head, split) points a depth sweep runs, and the curves it skips with the reason."""
    tasks, skipped = [], {}
    for mode in spec.modes:
        for head in spec.heads:
            why = None
            if width_a != width_b and (mode == "merge" or head == "a"):
                why = f"needs equal widths (A: D={width_a}, B: D={width_b})"
            elif mode == "merge" and n_a != n_b:
                why = f"needs equal depths to substitute blocks i..L (A: {n_a}, B: {n_b} blocks)"
            if why:
                skipped[f"{mode}, head {head}"] = why
            else:
                tasks += [(mode, head, k) for k in splits]
    if not tasks and not spec.heatmap:
        raise StitchError(f"nothing to run: {'; '.join(f'{k} {v}' for k, v in skipped.items())}; use mode stitch, head b")
    return tasks, skipped


def check_depth(spec: DepthSpec, store: Any) -> None:
    """Before anything is stored: the models, their vocabulary, the splits, and that some curve can run."""
    sa, sb = _pair_shapes(spec, store)
    _depth_splits(spec, sa["n_layer"])
    splits = list(spec.splits) if spec.splits is not None else list(range(sa["n_layer"] + 1))
    _depth_tasks(spec, sa["n_layer"], sb["n_layer"], sa["width"], sb["width"], splits)


# ------------------------------------------------------------------------------------ merge


# ---------------------------------------------------------------------------- estimate


def _lm_units(spec: MergeSpec | LMStitchSpec | DepthSpec, ectx: EstimateContext) -> dict[str, float]:
    """Loading, scoring one validation window, sampling one token, and one adapter step at the middle split."""
    device = ectx.device
    from stitchcore.lm.evaluate import eval_windows, lm_data, lm_loss, sample_text
    from stitchcore.lm.parts import build_stitch, lm_parts, make_token_adapter
    from stitchcore.lm.train import train_lm_adapter
    from stitchcore.stitching.train import parse_objective

    t0 = time.perf_counter()
    la, lb = ectx.load(spec.a), ectx.load(spec.b)
    a, b = lm_parts(la), lm_parts(lb)
    for p in (a, b):
        for mod in (p.embed, p.head, *p.blocks):
            mod.to(device)
    data = lm_data(spec.text or la.dataset or lb.dataset or "pydoc", a.codec)
    block = min(la.input_shape[0], lb.input_shape[0], a.context, b.context)
    setup = time.perf_counter() - t0
    windows = eval_windows(data.val, block, 8)
    whole = _whole(a, "A")
    window = (timed(lambda: lm_loss(whole, windows, device)) + timed(lambda: lm_loss(_whole(b, "B"), windows,
                                                                                         device))) / 2 / len(windows)
    token = timed(lambda: sample_text(whole, a.codec, data.prompt, 8, block, device)) / 8
    out = {"setup": setup, "window": window, "token": token, "n_a": a.n_layer, "n_b": b.n_layer,
           "same_width": float(a.width == b.width), "step": 0.0}  # fmt: skip
    if isinstance(spec, (LMStitchSpec, DepthSpec)):
        i = a.n_layer // 2 if isinstance(spec, DepthSpec) else spec.cut_a
        j = _receiver(i, a.n_layer, b.n_layer) if isinstance(spec, DepthSpec) else (
            spec.cut_a if spec.cut_b is None else spec.cut_b)
        adapter = make_token_adapter(spec.adapter, a, i, b, j, spec.mlp_hidden)
        model = build_stitch(a, b, i, j, adapter, "b")
        objective = {k: v for k, v in parse_objective(spec.objective).items() if k != "kd"} or {"task": 1.0}
        step = per_step(lambda steps, on_step: train_lm_adapter(
            model, i, adapter, data.train, block_size=block, objective=objective, steps=steps,
            batch_size=spec.batch_size, lr=1e-4, weight_decay=0.0, seed=0, device=device,
            receiver=lambda x: b.residual(x, j), on_step=on_step,
        ))  # fmt: skip
        out["step"] = step * (1.3 if "kd" in spec.objective else 1.0)
    return out


def estimate_lm(kind: str, spec: MergeSpec | LMStitchSpec | DepthSpec, ectx: EstimateContext) -> Estimate:
    train = {k: getattr(spec, k) for k in ("adapter", "batch_size", "mlp_hidden", "objective") if hasattr(spec, k)}
    cuts = (spec.cut_a, spec.cut_b) if isinstance(spec, LMStitchSpec) else None
    key = ("lm", kind, spec.a, spec.b, spec.text, repr(train), cuts, ectx.model_key(spec.a),
           ectx.model_key(spec.b), where(ectx.device))  # fmt: skip
    u = calibrated(key, lambda: _lm_units(spec, ectx))
    score = spec.eval_windows * u["window"]
    sample = spec.sample_tokens * u["token"]
    setup = u["setup"] + 2 * (score + sample)  # A and B scored and sampled
    if isinstance(spec, MergeSpec):
        return estimate_from(setup + score + sample, f"calibrated: 1 validation window = {ms(u['window'])}; "
                                                 f"{3 * spec.eval_windows} windows")
    fit = FIT_BATCHES * spec.batch_size * u["window"] if spec.adapter.init in ("lstsq", "procrustes") else 0.0
    stitch = fit + 2 * score + spec.steps * u["step"]
    if isinstance(spec, LMStitchSpec):
        return estimate_from(setup + stitch + sample, f"calibrated: 1 adapter step = {ms(u['step'])}; "
                                                  f"{spec.steps:,} steps")
    n_a, n_b = int(u["n_a"]), int(u["n_b"])
    splits = len(spec.splits) if spec.splits is not None else n_a + 1
    merges = stitches = 0
    for mode in spec.modes:
        for head in spec.heads:
            if not u["same_width"] and (mode == "merge" or head == "a"):
                continue
            if mode == "merge" and n_a != n_b:
                continue
            merges += splits * (mode == "merge")
            stitches += splits * (mode == "stitch")
    cells = (n_a + 1) * (n_b + 1) if spec.heatmap else 0
    curves = len(spec.modes) * len(spec.heads)
    seconds = setup + merges * score + (stitches + cells) * stitch + curves * sample
    return estimate_from(seconds, f"calibrated: 1 adapter step = {ms(u['step'])}; {stitches + cells} stitches of "
                              f"{spec.steps:,} steps, {merges} merges")




def estimate_merge(spec: MergeSpec, ectx: EstimateContext) -> Estimate:
    """A, B and the merged model scored and sampled."""
    return estimate_lm("merge", spec, ectx)


def estimate_lm_stitch(spec: LMStitchSpec, ectx: EstimateContext) -> Estimate:
    """A and B scored, the adapter fitted and trained, the stitched model scored and sampled."""
    return estimate_lm("lmstitch", spec, ectx)


def estimate_depth(spec: DepthSpec, ectx: EstimateContext) -> Estimate:
    """Every split's merges and stitches (and the heat map's), with a sample per curve."""
    return estimate_lm("lmdepth", spec, ectx)


@register_experiment("merge", MergeSpec.from_dict, check=check_merge, estimate=estimate_merge)
def run_merge(spec: MergeSpec, ctx: RunContext) -> dict:
    """A with B's blocks ``start .. end-1``; scores A, B and the merged model."""
    t0 = time.perf_counter()
    s = setup_pair(spec, ctx, lambda a, b: _merge_end(spec, a.n_layer, b.n_layer))
    end = _merge_end(spec, s.a.n_layer, s.b.n_layer)
    merged = build_merge(s.a, s.b, spec.start, end, spec.head, spec.embed)
    ctx.progress(0.5, "scoring the merged model")
    score = lm_loss(merged, s.windows, s.device, ctx.check_cancel)
    out = _common(s, spec)
    out["samples"]["merged"] = _sample(merged, s.a, s.data, spec, s.block, s.device)
    out.update({
        "mode": "merge", "layout": merged.layout, "start": spec.start, "end": end, "head": spec.head,
        "embed": spec.embed, **score, "loss_penalty": loss_penalty(s.base[spec.head]["loss"], score["loss"]),
        "penalty_base": spec.head, "params": 0, "seconds": round(time.perf_counter() - t0, 3),
    })
    return out


# ------------------------------------------------------------------------------------ stitch


def stitch_once(s: LMSetup, spec: LMStitchSpec | DepthSpec, ctx: RunContext | _UnitRun, i: int, j: int, head: str,
                head_at: int | None = None, step0: int = 0, span: tuple[float, float] = (0.1, 0.9),
                log_every: int = 5) -> tuple[ComposedLM, dict]:
    """Build, fit (lstsq) and train one stitch from A's position ``i`` to B's ``j``; returns (model, scores)."""
    torch.manual_seed(spec.seed)
    adapter = make_token_adapter(spec.adapter, s.a, i, s.b, j, spec.mlp_hidden)
    model = build_stitch(s.a, s.b, i, j, adapter, head, head_at)
    residual = None
    if spec.adapter.init in ("lstsq", "procrustes"):
        batches = [x for x, _ in _train_batches(s, spec, FIT_BATCHES)]
        pairs = ((s.a.residual(x.to(s.device), i).flatten(0, 1), s.b.residual(x.to(s.device), j).flatten(0, 1))
                 for x in batches)
        residual = fit_adapter(adapter.inner, pairs, method=spec.adapter.init)
    adapter.to(s.device)
    start = lm_loss(model, s.windows, s.device, ctx.check_cancel)
    objective = parse_objective(spec.objective)
    teacher = _whole(s.a if head == "a" else s.b, head.upper()) if "kd" in objective else None
    lo, hi = span

    def on_step(step: int, total: int, metrics: dict[str, float]) -> None:
        ctx.progress(lo + (hi - lo) * step / total, f"training adapter {i}->{j} (head {head}): step {step}/{total}")
        if step % log_every == 0 or step == total:
            ctx.log(step0 + step, {"loss": metrics["loss"]})

    losses = train_lm_adapter(
        model, i, adapter, s.data.train, block_size=s.block, objective=objective, steps=spec.steps,
        batch_size=spec.batch_size, lr=spec.lr, weight_decay=spec.weight_decay, seed=spec.seed, device=s.device,
        receiver=lambda x: s.b.residual(x, j), teacher=teacher, on_step=on_step, check_cancel=ctx.check_cancel,
    )
    score = lm_loss(model, s.windows, s.device, ctx.check_cancel)
    params = sum(p.numel() for p in adapter.parameters() if p.requires_grad)
    result = {
        **score, "start_loss": start["loss"], "loss_penalty": loss_penalty(s.base[head]["loss"], score["loss"]),
        "penalty_base": head, "params": int(params), "steps": len(losses),
        "lstsq_residual": None if residual is None else round(float(residual), 6),
        "final_train_loss": round(losses[-1], 6) if losses else None,
    }
    return model, result


def _train_batches(s: LMSetup, spec, n: int):
    from stitchcore.data.text import lm_batches

    return lm_batches(s.data.train, s.block, spec.batch_size, spec.seed + 7919, n)


@register_experiment("lmstitch", LMStitchSpec.from_dict, check=check_lm_stitch, estimate=estimate_lm_stitch)
def run_lm_stitch(spec: LMStitchSpec, ctx: RunContext) -> dict:
    """One LM stitch: train the adapter, score A, B and C, sample all three."""
    t0 = time.perf_counter()
    j = spec.cut_a if spec.cut_b is None else spec.cut_b
    s = setup_pair(spec, ctx, lambda a, b: stitch_layout(a.n_layer, b.n_layer, spec.cut_a, j, spec.head, spec.head_at))
    model, result = stitch_once(s, spec, ctx, spec.cut_a, j, spec.head, spec.head_at, span=(0.1, 0.95))
    out = _common(s, spec)
    out["samples"]["stitched"] = _sample(model, s.a, s.data, spec, s.block, s.device)
    adapter = next(p for p in model.parts if isinstance(p, TokenwiseAdapter))
    state = {k: v.detach().cpu().contiguous() for k, v in adapter.state_dict().items()}
    ctx.store.put_artifact(ctx.run_id, ADAPTER_WEIGHTS, save(state))
    out.update({
        "mode": "stitch", "layout": model.layout, "cut_a": spec.cut_a, "cut_b": j, "head": spec.head,
        "cut_names": {"a": cut_name(s.a.family, spec.cut_a), "b": cut_name(s.b.family, j)},
        **result, "seconds": round(time.perf_counter() - t0, 3),
    })
    return out


# ------------------------------------------------------------------------------------ depth sweep


def _receiver(i: int, n_a: int, n_b: int) -> int:
    """B's position matching A's split ``i`` (the same relative depth when the depths differ)."""
    return i if n_a == n_b else round(i * n_b / max(n_a, 1))


def _point_label(mode: str, head: str) -> str:
    """The curve a depth point belongs to: ``merge, head A``."""
    return f"{mode}, head {head.upper()}"


def _penalty_series(mode: str, head: str) -> str:
    """The metric series a depth sweep logs each finished point to (step = split): ``penalty:merge:a``."""
    return f"{PENALTY_SERIES}:{mode}:{head}"


def partial_points(metrics: Mapping[str, Sequence[tuple[int, float]]]) -> list[dict[str, Any]]:
    """The depth-sweep points a run has logged so far, from its metric series (a job snapshot's ``metrics``
    or ``store.series(run_id)``); the same keys as the summary's ``points`` except the cut name ("").

    >>> partial_points({"penalty:merge:a": [(0, -0.5), (1, -0.2)], "loss": [(1, 2.0)]})[1]
    {'label': 'merge, head A', 'split': 1, 'loss_penalty': -0.2, 'cut': '', 'mode': 'merge', 'head': 'a'}
    """
    out = []
    for name, pts in metrics.items():
        kind, _, rest = name.partition(":")
        mode, _, head = rest.partition(":")
        if kind != PENALTY_SERIES or not mode or not head:
            continue
        out += [{"label": _point_label(mode, head), "split": int(k), "loss_penalty": v, "cut": "", "mode": mode,
                 "head": head} for k, v in pts]  # fmt: skip
    return out


class _UnitRun:
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


def depth_unit(spec: DepthSpec, source: LMSetup | dict, job: tuple, step0: int, context: UnitContext,
               ) -> Iterator[tuple[str, Any]]:  # fmt: skip
    """A run's unit: one point of a curve (``("point", mode, head, split, with_sample)``) or one row of the
    heat map (``("row", i)``: A's position i into every position of B).  Yields the training loss points
    (``"metrics"``) and the results (``"cells"``)."""
    s = source if isinstance(source, LMSetup) else _setup_in_worker(source, context.device)
    run, n_a, n_b = _UnitRun(context), s.a.n_layer, s.b.n_layer
    if job[0] == "point":
        _, mode, head, k, with_sample = job
        j = _receiver(k, n_a, n_b)
        yield "progress", (0.0, f"{mode}, head {head}, split {k}")
        if mode == "merge":
            model = build_merge(s.a, s.b, k, n_a, head)
            res = lm_loss(model, s.windows, s.device, context.check_cancel)
            res["loss_penalty"] = loss_penalty(s.base[head]["loss"], res["loss"])
        else:
            model, res = stitch_once(s, spec, run, k, j, head, step0=step0, span=(0.0, 1.0), log_every=10)
        point = {"mode": mode, "head": head, "split": k, "receiver": j, "depth": round(k / max(n_a, 1), 6),
                 "cut": cut_name(s.a.family, k), "label": _point_label(mode, head),
                 "loss": res["loss"], "loss_penalty": res["loss_penalty"], "penalty_base": head}  # fmt: skip
        sample = _sample(model, s.a, s.data, spec, s.block, s.device) if with_sample else None
        yield "metrics", run.take()
        yield "cells", [{"point": point, "sample": sample}]
        return
    _, i = job
    for j in range(n_b + 1):
        yield "progress", (j / (n_b + 1), f"heat map: A's {cut_name(s.a.family, i)} into B's {cut_name(s.b.family, j)}")
        _, res = stitch_once(s, spec, run, i, j, "b", step0=step0 + j * max(spec.steps, 1), span=(0.0, 1.0),
                             log_every=25)  # fmt: skip
        yield "metrics", run.take()
        yield "cells", [{"cell": [i, j], "loss_penalty": res["loss_penalty"]}]


@register_experiment("lmdepth", DepthSpec.from_dict, check=check_depth, backends=("local", "ray"),
                     estimate=estimate_depth)
def run_depth(spec: DepthSpec, ctx: RunContext) -> dict:
    """Merge and stitch penalties at every split, per head; optionally every (i, j) stitch.

    Each point and each heat-map row is a unit on ``ctx.options``' backend; this process writes the store.
    """
    t0 = time.perf_counter()
    s = setup_pair(spec, ctx, lambda a, _b: _depth_splits(spec, a.n_layer))
    n_a, n_b = s.a.n_layer, s.b.n_layer
    splits = list(spec.splits) if spec.splits is not None else list(range(n_a + 1))
    tasks, skipped = _depth_tasks(spec, n_a, n_b, s.a.width, s.b.width, splits)
    per_stitch = max(spec.steps, 1)
    backend = ctx.backend()
    source: LMSetup | dict = s
    if backend.name != "local":
        la, lb = s.loaded
        source = {"a": backend.share(pack_model(la)), "b": backend.share(pack_model(lb)),
                  "data": backend.share(s.data), "windows": s.windows, "block": s.block, "base": s.base}  # fmt: skip
    units, offset = [], 0  # offset: the first metric step of each unit, as when they ran one after another
    for mode, head, k in tasks:
        job = ("point", mode, head, k, k == splits[len(splits) // 2])  # one sample per curve, at the middle split
        units.append(Unit(f"{mode}|{head}|{k}", depth_unit, (spec, source, job, offset)))
        offset += per_stitch if mode == "stitch" else 1
    if spec.heatmap:
        for i in range(n_a + 1):
            units.append(Unit(f"row|{i}", depth_unit, (spec, source, ("row", i), offset), cells=n_b + 1))
            offset += per_stitch * (n_b + 1)
    weight = {u.key: (per_stitch if u.key.startswith("stitch") else 1) if u.cells == 1 else per_stitch * u.cells
              for u in units}  # fmt: skip
    total, finished = sum(weight.values()), 0.0
    inside: dict[str, float] = {}

    def overall(message: str) -> None:
        busy = sum(weight[k] * f for k, f in inside.items())
        ctx.progress(0.05 + 0.9 * min(1.0, (finished + busy) / total), message)

    def report(unit: Unit, fraction: float, message: str) -> None:
        inside[unit.key] = fraction
        overall(message)

    found: dict[str, dict] = {}
    values = [[None] * (n_b + 1) for _ in range(n_a + 1)] if spec.heatmap else None
    failed: dict[str, str] = {}
    samples = dict(s.samples)
    def points(unit: Unit, step: int, metrics: dict[str, float]) -> None:
        ctx.log(step, metrics)

    for event in backend.run_units(units, ctx.cancel, on_progress=report, on_metrics=points):
        key = event.unit.key
        if event.kind == "progress":
            inside[key] = event.payload[0]
            overall(event.payload[1] + event.where_words)
        elif event.kind == "metrics":
            for step, metrics in event.payload:
                ctx.log(step, metrics)
        elif event.kind == "cells":
            for item in event.payload:
                if "point" in item:
                    p = item["point"]
                    found[key] = event.stamp(p)
                    ctx.log(p["split"], {_penalty_series(p["mode"], p["head"]): p["loss_penalty"]})
                    if item["sample"] is not None:
                        samples[f"{p['mode']}, head {p['head'].upper()}, split {p['split']}"] = item["sample"]
                    finished += weight[key]
                    inside.pop(key, None)
                    overall(f"{p['mode']}, head {p['head']}, split {p['split']}: penalty {p['loss_penalty']:+.3f}")
                else:
                    i, j = item["cell"]
                    values[i][j] = item["loss_penalty"]
                    finished += per_stitch
                    inside.pop(key, None)
        elif event.kind == "failed":
            failed[key] = event.payload
            log.warning("lmdepth %s: %s failed: %s", ctx.run_id, key, event.payload)
    ctx.check_cancel()  # Stop during the units: the run ends cancelled
    points = [found[u.key] for u in units if u.key in found]
    heat = None
    if spec.heatmap:
        heat = {"rows": [cut_name(s.a.family, i) for i in range(n_a + 1)],
                "cols": [cut_name(s.b.family, j) for j in range(n_b + 1)], "values": values, "head": "b"}
    out = _common(s, spec)
    out.update({"mode": "depth", "points": points, "splits": splits, "skipped": skipped, "heatmap": heat,
                "samples": samples, "seconds": round(time.perf_counter() - t0, 3)})
    if failed:  # unit key -> why (its cluster task failed for good); the rest completed
        out["failed"] = failed
    if backend.name != "local":
        out["backend"] = backend.describe()
        out["nodes"] = cells_per_node(points)
    return out
