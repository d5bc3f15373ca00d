"""Adapters: the small trainable maps that join a sender cut to a receiver cut.

An :class:`Adapter` maps the sender's activation (batch first, sender layout) to the
receiver's layout and exact shape: ``prepare`` (layout conversion, resampling) ->
``bn_before`` -> ``core`` (the kind) -> ``bn_after`` -> ``finish``.  Inside, tensors
are channel-first, in one of three forms chosen from the pair (:class:`AdapterPlan`):

* ``map`` [B, C, H, W]: both cuts spatial (``map``, ``map_nhwc``, or row-major ``tokens``
  with N = s*s, or P + s*s with P leading class and register tokens).  The sender is resampled to
  the receiver grid by ``prepare`` (bilinear, nearest) or by the core (``strided``: a
  conv with stride = the integer ratio down; nearest upsampling + the core's 1x1 up).
  A sender's class (and register) tokens are dropped.  A receiver's class token is, by ``AdapterSpec.cls_token``:
  ``"adapter"`` (default) the mean of the produced patch tokens plus ``cls_offset``, a learned
  [D] vector starting at zero (the adapter learns a class token; [P, D] for P leading tokens); ``"receiver"`` B's
  own class token at the receiving cut, a fixed [D] ([P, D]) buffer ``cls_fixed`` that the caller sets with
  :meth:`Adapter.set_receiver_cls` (e.g. B's mean class token there over training images).
* ``seq`` [B, D, N]: tokens to tokens with equal N and a token-wise kind (one map over
  D per token, class token to class token); the only way for tokens without a grid.
* ``vec`` [B, D]: a vector receiver; maps are average-pooled, tokens mean-pooled.

A vector sender cannot feed a spatial receiver.  The kinds (the core) and their registry are
:mod:`stitchcore.stitching.adapter_kinds`; this module turns a spec and two cuts into an adapter.

>>> from types import SimpleNamespace as Cut
>>> a = Cut(name="layer1", shape=(16, 8, 8), layout="map", depth=0.3)
>>> b = Cut(name="blocks.2", shape=(17, 32), layout="tokens", depth=0.5)
>>> build_adapter(AdapterSpec("linear"), a, b)(torch.zeros(2, 16, 8, 8)).shape
torch.Size([2, 17, 32])
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from stitchcore.errors import AdapterError
from stitchcore.stitching.adapter_kinds import (
    AdapterCore,
    AdapterPlan,
    RescaleStep,
    get_adapter,
    list_adapters,
    register_adapter,
)

if TYPE_CHECKING:  # any object with name, shape (no batch), layout and depth will do at run time
    from stitchcore.cuts import Cut

__all__ = [
    "CLS_TOKENS",
    "larger_map_refusal",
    "INITS",
    "LAYOUTS",
    "NORMS",
    "NO_DOWNSAMPLE",
    "RESAMPLES",
    "RESCALES",
    "Adapter",
    "AdapterCore",
    "AdapterPlan",
    "AdapterSpec",
    "ChainedCore",
    "RescaleStep",
    "adapter_cost",
    "build_adapter",
    "compatibility",
    "get_adapter",
    "list_adapters",
    "register_adapter",
    "rescale_steps",
]  # fmt: skip

logger = logging.getLogger(__name__)

LAYOUTS = ("map", "map_nhwc", "tokens", "vector")
NORMS = ("none", "bn_before", "bn_after", "both")
RESAMPLES = ("none", "bilinear", "nearest", "strided")
NO_DOWNSAMPLE = "no_downsample"  # Traft & Cheney's No Downsample: the sender's larger grid goes on into B (assemble)
RESCALES = ("oneshot", "chained")  # the whole ratio in one resize / core stride, or one 2x step per adapter
INITS = ("random", "identity", "lstsq", "procrustes")
CLS_TOKENS = ("adapter", "receiver")  # who makes a token receiver's class token: the adapter learns it, or B's own
_RANK = {"map": 3, "map_nhwc": 3, "tokens": 2, "vector": 1}  # layout -> len(cut.shape)


@dataclass(frozen=True)
class AdapterSpec:
    """Which adapter joins two cuts; stored with every run and hashed into its key.

    >>> AdapterSpec("lowrank", rank=8).to_dict()
    {'kind': 'lowrank', 'norm': 'both', 'resample': 'bilinear', 'init': 'random', 'rank': 8}
    """

    kind: str = "linear"  # registered kind (list_adapters()); linear = Bansal et al.'s 1x1 conv / Linear
    norm: str = "both"  # BatchNorm placement; both = Bansal et al. and Traft & Cheney (BN before and after)
    resample: str = "bilinear"  # sender grid -> receiver grid; bilinear was best in Traft & Cheney
    init: str = "random"  # random | identity (eye weight) | lstsq | procrustes (fits.fit_adapter on data)
    rank: int | None = None  # lowrank width; None -> min(C_in, C_out) // 4, at least 1
    cls_token: str = "adapter"  # a token receiver's class token: learned by the adapter, or B's own (fixed)
    # a grid change of more than 2x: "oneshot" resizes by the whole ratio at once (or one core strides by it; what
    # every spec before issue 25 computed, so absent from old dicts), "chained" one core per 2x step (Traft & Cheney)
    rescale: str = "oneshot"

    def __post_init__(self) -> None:
        core = get_adapter(self.kind)
        resamples = (*RESAMPLES, NO_DOWNSAMPLE)
        for name, valid in (("norm", NORMS), ("resample", resamples), ("init", INITS), ("cls_token", CLS_TOKENS),
                            ("rescale", RESCALES)):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, str) or value not in valid:
                raise AdapterError(f"unknown adapter {name} {value!r}; valid: {', '.join(valid)}")
        rank = self.rank
        bad_rank = rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1)
        if rank is not None and (bad_rank or not core.uses_rank):
            raise AdapterError(f"rank must be a positive int, for kind='lowrank' only; got {rank!r}",
                               fix={} if core.uses_rank else {"adapter.rank": None})
        if self.init in ("lstsq", "procrustes") and not core.fittable:
            raise AdapterError(
                f"{self.init} init needs a linear adapter (kind linear, linear_relu or lowrank), "
                f"not {self.kind!r}; use init='random'", fix={"adapter.init": "random"}
            )
        if self.init == "identity" and not core.identity_init:
            raise AdapterError(f"init='identity' is not available for kind {self.kind!r}; use init='random'",
                               fix={"adapter.init": "random"})
        if core.passthrough:  # the merge adapter has nothing to normalise, resample or initialise
            for name, value in (("norm", "none"), ("resample", "none"), ("init", "identity"), ("rescale", "oneshot")):
                object.__setattr__(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["cls_token"] == "adapter":  # absent unless chosen: run ids of older specs stay the same
            del d["cls_token"]
        if d["rescale"] == "oneshot":  # the legacy reading: absent, so the ids of specs before it stay
            del d["rescale"]
        return d

    def all_fields(self) -> dict[str, Any]:
        """Every field written out, the ones ``to_dict`` leaves out at their legacy value included: a dict that
        means this adapter whether read as stored or completed from a new spec's default adapter.

        >>> AdapterSpec(init="lstsq").all_fields()["rescale"]
        'oneshot'
        """
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AdapterSpec:
        names = [f.name for f in fields(cls)]
        if not isinstance(d, Mapping):
            raise AdapterError(f"an adapter spec is a mapping of {', '.join(names)}, not {type(d).__name__}")
        if bad := sorted(set(d) - set(names)):
            raise AdapterError(f"unknown AdapterSpec field(s) {', '.join(bad)}; valid: {', '.join(names)}")
        return cls(**d)


def _fmt(cut: Cut) -> str:
    return f"{cut.layout} {list(cut.shape)}"


def _check_cut(cut: Cut, role: str) -> None:
    layout, shape = getattr(cut, "layout", None), getattr(cut, "shape", None)
    if layout not in LAYOUTS:
        raise AdapterError(f"{role} cut has layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    n = _RANK[layout]
    if shape is None or len(tuple(shape)) != n or any(not isinstance(s, int) or s < 1 for s in shape):
        raise AdapterError(f"{role} cut: a {layout} shape is {n} positive ints (no batch), got {shape}")


def _spatial(cut: Cut) -> tuple[tuple[int, int], int] | None:
    """((H, W), leading non-grid tokens) for a cut that can be a map, else None.

    A token cut is N = P + s*s: P the class and register tokens its model declares (``cut.prefix_tokens``; DINOv2
    with 4 registers: P = 5), else read as s*s or s*s + 1 (a class token).

    >>> from types import SimpleNamespace as Cut
    >>> _spatial(Cut(name="blocks.0", shape=(21, 8), layout="tokens", depth=0.5, prefix_tokens=5))
    ((4, 4), 5)
    >>> _spatial(Cut(name="blocks.0", shape=(17, 8), layout="tokens", depth=0.5))
    ((4, 4), 1)
    """
    if cut.layout == "map":
        return tuple(cut.shape[1:]), 0
    if cut.layout == "map_nhwc":
        return tuple(cut.shape[:2]), 0
    declared = getattr(cut, "prefix_tokens", None)
    for extra in ((declared,) if declared is not None else (0, 1)) if cut.layout == "tokens" else ():
        s = math.isqrt(max(cut.shape[0] - extra, 0))
        if s >= 1 and s * s == cut.shape[0] - extra:
            return (s, s), extra
    return None


def _halve(g: int, target: int) -> int:
    """One chained step of one axis: halve (rounding up) or double, never past ``target``."""
    if g > target:
        return max(target, -(-g // 2))
    return min(target, 2 * g) if g < target else g


def rescale_steps(resample: str, src: tuple[int, int], dst: tuple[int, int]) -> tuple[RescaleStep, ...]:
    """The chained rescale of grid ``src`` to ``dst``: one step per 2x (Traft & Cheney's one adapter per scale step).

    Each step halves an axis (rounding up; the last one stops at ``dst``) or doubles it.  ``bilinear``: an exact 2x
    down is the plain 2x2 average (the authors' Downsample variant), any other step (odd sizes, a last step of
    less than 2x, e.g. 4 -> 3) bilinear with antialias, so every input position reaches the output.  ``strided``:
    the step's core strides by 2 (the authors' integrated variant: a stride-2 3x3 conv), on an input resized
    (bilinear, antialias) to exactly twice the step's grid when it is not already; upsampling is nearest + the
    core.  ``nearest`` cannot downsample in steps without dropping 3 of 4 positions a step: refused.

    >>> [(s.grid, s.resize, s.stride) for s in rescale_steps("strided", (8, 8), (1, 1))]
    [((4, 4), None, (2, 2)), ((2, 2), None, (2, 2)), ((1, 1), None, (2, 2))]
    >>> [(s.grid, s.resize, s.antialias) for s in rescale_steps("bilinear", (8, 8), (3, 3))]
    [((4, 4), 'bilinear', False), ((3, 3), 'bilinear', True)]
    """
    steps, g = [], tuple(src)
    while g != tuple(dst):
        n = (_halve(g[0], dst[0]), _halve(g[1], dst[1]))
        down = [n[i] < g[i] for i in (0, 1)]
        exact = all(g[i] == 2 * n[i] for i in (0, 1) if down[i])
        if resample == "bilinear":
            steps.append(RescaleStep(n, "bilinear", n, antialias=any(down) and not exact))
        elif resample == "nearest":
            if any(down):
                raise AdapterError(f"resample='nearest' with rescale='chained' would keep 1 of 4 positions per 2x "
                                   f"step ({src[0]}x{src[1]} -> {dst[0]}x{dst[1]}); use 'bilinear' or 'strided'")
            steps.append(RescaleStep(n, "nearest", n))
        elif any(n[i] > g[i] for i in (0, 1)):  # strided upsampling: nearest + the core
            steps.append(RescaleStep(n, "nearest", n))
        else:
            size = tuple(2 * n[i] if down[i] else n[i] for i in (0, 1))
            resize = None if size == g else "bilinear"
            steps.append(RescaleStep(n, resize, size if resize else None, antialias=resize is not None,
                                     stride=tuple(2 if d else 1 for d in down)))  # fmt: skip
        g = n
    return tuple(steps)


def chained_fits(spec: AdapterSpec, steps: tuple[RescaleStep, ...]) -> bool:
    """Whether a closed-form fit can set a chained rescale: one step (its core is the fit's, as oneshot's), or
    resize-only steps of a linear core, where the chain is the first core after every resize (the later cores
    start at identity, :meth:`ChainedCore.fit_through`).

    >>> chained_fits(AdapterSpec(init="lstsq"), rescale_steps("bilinear", (8, 8), (1, 1)))
    True
    >>> chained_fits(AdapterSpec("linear_relu", init="lstsq"), rescale_steps("bilinear", (8, 8), (1, 1)))
    False
    """
    core = get_adapter(spec.kind)
    resize_only = all(step.stride == (1, 1) for step in steps)
    return len(steps) == 1 or (resize_only and core.linear_map and core.identity_init)


def _map_plan(spec: AdapterSpec, s_sp: tuple, r_sp: tuple, c_in: int, c_out: int, receiver: Cut) -> AdapterPlan:
    ((sh, sw), s_cls), ((rh, rw), r_cls) = s_sp, r_sp
    plan = AdapterPlan("map", c_in, c_out, grid=(rh, rw), sender_cls=s_cls, receiver_cls=r_cls)
    if (sh, sw) == (rh, rw):
        return plan
    sizes = f"{sh}x{sw} -> {rh}x{rw}"
    if spec.resample == "none":
        raise AdapterError(f"spatial sizes differ ({sizes}) and resample='none'; use resample='bilinear'")
    if spec.resample == NO_DOWNSAMPLE and rh <= sh and rw <= sw:
        if receiver.layout == "tokens":
            raise AdapterError(f"No Downsample hands B the sender's {sh}x{sw} grid, but a token receiver's position "
                               f"embedding fixes its {rh}x{rw} grid; use 'bilinear' or 'strided'")  # fmt: skip
        if spec.init in ("lstsq", "procrustes"):
            raise AdapterError(f"No Downsample keeps the {sh}x{sw} grid, so B's {rh}x{rw} activations cannot be the "
                               f"targets of a {spec.init} fit; use init='random'")  # fmt: skip
        return replace(plan, grid=(sh, sw), out_grid=(sh, sw))
    resample = "bilinear" if spec.resample == NO_DOWNSAMPLE else spec.resample  # upsampling: as bilinear
    if spec.rescale == "chained":
        steps = rescale_steps(resample, (sh, sw), (rh, rw))
        if spec.init in ("lstsq", "procrustes") and not chained_fits(spec, steps):
            raise AdapterError(f"a chained rescale ({sizes}) of {spec.kind!r} cores"
                               + (" with strided steps" if any(s.stride != (1, 1) for s in steps) else "")
                               + f" has {len(steps)} maps and a closed-form fit sets one; use rescale='oneshot' "
                               "or init='random'", fix={"adapter.rescale": "oneshot"})  # fmt: skip
        return replace(plan, steps=steps)
    if resample in ("bilinear", "nearest"):
        return replace(plan, resize=resample)
    if rh >= sh and rw >= sw:  # strided upsampling = nearest upsample + the core's 1x1 conv
        return replace(plan, resize="nearest")
    if rh <= sh and rw <= sw and sh % rh == 0 and sw % rw == 0:
        return replace(plan, stride=(sh // rh, sw // rw))
    raise AdapterError(f"resample='strided' needs an integer downsampling ratio ({sizes}); use 'bilinear' or "
                       "rescale='chained'")


def _why_not(spec: AdapterSpec, sender: Cut, receiver: Cut, s_sp: Any, r_sp: Any) -> str:
    if r_sp is not None and sender.layout == "vector":
        why = "receiver expects a spatial map but the sender is a vector (after pooling)"
        # an MLP has no spatial cut at all: name the choice that always exists first
        return f"{why}; pick a vector receiver cut, or a sender cut before A's pooling if A has one"
    n_s, n_r = sender.shape[0], receiver.shape[0]
    if sender.layout == receiver.layout == "tokens" and n_s == n_r:
        return f"kind {spec.kind!r} needs spatial maps; these tokens have no square grid; use kind='linear'"
    if sender.layout == receiver.layout == "tokens":
        return (
            f"token counts differ ({n_s} vs {n_r}) and tokens without a square grid cannot be resampled; "
            "pick cuts with the same sequence length"
        )
    role, cut = ("receiver", receiver) if r_sp is None else ("sender", sender)
    return f"{role} {_fmt(cut)} has no square token grid (N = H*W or H*W+1); pick another {role} cut"


def _plan(spec: AdapterSpec, sender: Cut, receiver: Cut) -> AdapterPlan:
    """How ``spec`` joins the pair; raises AdapterError(one-line reason) when it cannot."""
    if not isinstance(spec, AdapterSpec):
        raise AdapterError(f"need an AdapterSpec, not {type(spec).__name__}; use AdapterSpec(...)")
    _check_cut(sender, "sender")
    _check_cut(receiver, "receiver")
    core = get_adapter(spec.kind)
    c_in = sender.shape[0] if sender.layout == "map" else sender.shape[-1]
    c_out = receiver.shape[0] if receiver.layout == "map" else receiver.shape[-1]
    if core.passthrough:
        if sender.layout != receiver.layout or tuple(sender.shape) != tuple(receiver.shape):
            raise AdapterError(
                f"kind {spec.kind!r} (merge) needs identical cuts, got sender {_fmt(sender)} and "
                f"receiver {_fmt(receiver)}; use kind='linear'"
            )
        return AdapterPlan("pass", c_in, c_out)
    s_sp, r_sp, seqwise = _spatial(sender), _spatial(receiver), "seq" in core.forms
    if receiver.layout == "vector":
        plan = AdapterPlan("vec", c_in, c_out)
    elif sender.layout == receiver.layout == "tokens" and sender.shape[0] == receiver.shape[0] and seqwise:
        plan = AdapterPlan("seq", c_in, c_out)
    elif s_sp is not None and r_sp is not None:
        plan = _map_plan(spec, s_sp, r_sp, c_in, c_out, receiver)
    else:
        raise AdapterError(_why_not(spec, sender, receiver, s_sp, r_sp))
    if plan.form not in core.forms:
        raise AdapterError(
            f"kind {spec.kind!r} needs spatial maps but {_fmt(sender)} -> {_fmt(receiver)} joins as "
            f"{plan.form!r}; use kind='linear'"
        )
    if spec.init == "identity" and c_in != c_out:
        raise AdapterError(f"init='identity' needs equal channels, got {c_in} -> {c_out}; use init='lstsq'")
    if core.uses_rank:
        rank = spec.rank if spec.rank is not None else max(1, min(c_in, c_out) // 4)
        if rank > min(c_in, c_out):
            raise AdapterError(f"rank {rank} exceeds min(C_in, C_out) = {min(c_in, c_out)}; lower it")
        plan = replace(plan, rank=rank)
    return plan


def compatibility(sender: Cut, receiver: Cut, spec: AdapterSpec | None = None) -> str | None:
    """None when ``spec`` (default AdapterSpec()) can join sender to receiver, else the one-line reason."""
    try:
        _plan(spec if spec is not None else AdapterSpec(), sender, receiver)
    except AdapterError as e:
        return str(e)
    return None


def _tokens_to_map(t: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    return t.transpose(1, 2).reshape(t.shape[0], t.shape[2], *grid)  # [B, H*W, D] -> [B, D, H, W], row-major


class ChainedCore(nn.Module):
    """A chained rescale: per :class:`RescaleStep` a resize (or none), one core of the kind, and a BatchNorm between
    steps (when the spec has any); [B, C_in, H, W] -> [B, C_out, H_r, W_r].  Step 1 maps C_in -> C_out, the later
    ones C_out -> C_out: Traft & Cheney's "multiple adapters, in the case of bridging multiple scale-shifts"."""

    def __init__(self, spec: AdapterSpec, plan: AdapterPlan):
        super().__init__()
        self.plan, kind = plan, get_adapter(spec.kind)
        self.steps = plan.steps
        self.cores = nn.ModuleList(
            kind(replace(plan, c_in=plan.c_in if i == 0 else plan.c_out, grid=step.grid, stride=step.stride,
                         steps=(), resize=None))
            for i, step in enumerate(plan.steps)
        )
        between = spec.norm != "none"
        self.norms = nn.ModuleList(nn.BatchNorm2d(plan.c_out) if between else nn.Identity()
                                   for _ in plan.steps[1:])  # fmt: skip

    def init_identity(self) -> None:
        for core in self.cores:
            core.init_identity()

    @property
    def linear(self) -> nn.Module:
        """The map a closed-form fit sets: the first step's (:func:`chained_fits` says when that is the whole)."""
        return self.cores[0].linear

    @property
    def fittable(self) -> bool:
        return bool(getattr(self.cores[0], "fittable", False))

    def resized(self, x: torch.Tensor) -> torch.Tensor:
        """[B, C, H, W] through every step's resize alone: what the first core sees once the later cores are the
        identity (a linear core commutes with a resize) -> [B, C, H_r, W_r]."""
        for step in self.steps:
            x = self._resize(step, x)
        return x

    @torch.no_grad()
    def fit_through(self) -> None:
        """After a closed-form fit of the first core: every later core and every BatchNorm between at identity
        (eval), so the chain computes the fit."""
        for core in self.cores[1:]:
            core.init_identity()
        for bn in self.norms:
            if isinstance(bn, nn.BatchNorm2d):
                bn.running_mean.zero_()
                bn.running_var.fill_(1.0 - bn.eps)  # (x - 0) / sqrt(var + eps) = x
                bn.weight.fill_(1.0)
                bn.bias.zero_()

    @staticmethod
    def _resize(step: RescaleStep, x: torch.Tensor) -> torch.Tensor:
        if step.resize is None:
            return x
        kwargs = {"align_corners": False, "antialias": step.antialias} if step.resize == "bilinear" else {}
        return F.interpolate(x, size=step.size, mode=step.resize, **kwargs)  # [B, C, *step.size]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, (step, core) in enumerate(zip(self.steps, self.cores, strict=True)):
            if i:
                x = self.norms[i - 1](x)  # [B, C_out, h, w]
            x = core(self._resize(step, x))  # [B, C_out, *step.grid]
        return x


class Adapter(nn.Module):
    """prepare -> bn_before -> core -> bn_after -> finish; see the module docstring for the forms."""

    def __init__(self, spec: AdapterSpec, sender: Cut, receiver: Cut, plan: AdapterPlan):
        super().__init__()
        self.spec, self.sender, self.receiver, self.plan = spec, sender, receiver, plan
        bn = nn.BatchNorm2d if plan.ndim == 4 else nn.BatchNorm1d  # 1d: [B, C] or [B, C, N]
        norm = spec.norm if plan.ndim else "none"  # the merge adapter has none
        self.bn_before = bn(plan.c_in) if norm in ("bn_before", "both") else nn.Identity()
        self.core = ChainedCore(spec, plan) if plan.steps else get_adapter(spec.kind)(plan)
        self.bn_after = bn(plan.c_out) if norm in ("bn_after", "both") else nn.Identity()
        # the receiver's leading tokens: [D] for a class token alone (what stored adapters hold), [P, D] for P > 1
        lead = (plan.c_out,) if plan.receiver_cls <= 1 else (int(plan.receiver_cls), plan.c_out)
        learned = plan.receiver_cls and spec.cls_token == "adapter"
        self.cls_offset = nn.Parameter(torch.zeros(lead)) if learned else None  # [D] | [P, D]
        fixed = torch.zeros(lead) if plan.receiver_cls and spec.cls_token == "receiver" else None
        self.register_buffer("cls_fixed", fixed)  # [D] | [P, D] B's own leading tokens, set by set_receiver_cls
        if spec.init == "identity":
            self.core.init_identity()

    def extra_repr(self) -> str:
        return f"{_fmt(self.sender)} -> {_fmt(self.receiver)}, form={self.plan.form}"

    def set_receiver_cls(self, token: torch.Tensor) -> None:
        """Use ``token`` [D] as the receiver's class token (``cls_token="receiver"``): B's own at that cut; [P, D]
        where the receiver leads with P > 1 tokens (class and registers).

        >>> from types import SimpleNamespace as Cut
        >>> a = Cut(name="s", shape=(8, 2, 2), layout="map", depth=0.5)
        >>> b = Cut(name="blocks.1", shape=(5, 6), layout="tokens", depth=0.5)
        >>> ad = build_adapter(AdapterSpec(cls_token="receiver"), a, b).eval()
        >>> ad.set_receiver_cls(torch.arange(6.0))
        >>> ad(torch.randn(3, 8, 2, 2))[:, 0].tolist() == [list(range(6))] * 3
        True
        """
        if self.cls_fixed is None:
            raise AdapterError("this adapter makes no fixed class token: it needs a token receiver with a class "
                               "token and AdapterSpec(cls_token='receiver')")  # fmt: skip
        if tuple(token.shape) != tuple(self.cls_fixed.shape):
            raise AdapterError(f"receiver class token must be {list(self.cls_fixed.shape)}, got {list(token.shape)}")
        self.cls_fixed.copy_(token.detach().to(self.cls_fixed))

    @staticmethod
    def _check(t: torch.Tensor, cut: Cut, role: str) -> None:
        if t.dim() != len(cut.shape) + 1 or tuple(t.shape[1:]) != tuple(cut.shape):
            raise AdapterError(
                f"adapter expects {role} activations [B, {', '.join(map(str, cut.shape))}] ({cut.layout} at "
                f"{getattr(cut, 'name', '?')!r}), got {list(t.shape)}; pass that cut's batch-first activation"
            )

    def prepare(self, x: torch.Tensor) -> torch.Tensor:
        """Sender activation [B, *sender.shape] -> core input [B, C_in, ...] (what bn_before sees)."""
        self._check(x, self.sender, "sender")
        p, lay = self.plan, self.sender.layout
        if p.form == "pass" or lay == "vector":
            return x  # [B, D]
        if p.form == "vec":  # map [B,C,H,W] / map_nhwc [B,H,W,C] / tokens [B,N,D] -> [B, C]
            return x.mean(dim={"map": (2, 3), "map_nhwc": (1, 2), "tokens": (1,)}[lay])
        if p.form == "seq":
            return x.transpose(1, 2)  # [B, N, D] -> [B, D, N]
        if lay == "map_nhwc":
            x = x.permute(0, 3, 1, 2)  # [B, H, W, C] -> [B, C, H, W]
        elif lay == "tokens":
            x = x[:, int(p.sender_cls):]  # [B, s*s, D] without the class (and register) tokens
            s = math.isqrt(x.shape[1])
            x = _tokens_to_map(x, (s, s))  # [B, D, s, s]
        if p.resize is not None:
            kwargs = {"align_corners": False} if p.resize == "bilinear" else {}
            x = F.interpolate(x, size=p.grid, mode=p.resize, **kwargs)  # [B, C, H_r, W_r]
        return x

    def targets(self, y: torch.Tensor) -> torch.Tensor:
        """Receiver activation -> core output [B, C_out, ...]: finish's inverse (a class token is dropped)."""
        self._check(y, self.receiver, "receiver")
        p, lay = self.plan, self.receiver.layout
        if p.form in ("pass", "vec"):
            return y
        if p.form == "seq":
            return y.transpose(1, 2)  # [B, N, D] -> [B, D, N]
        if lay == "map_nhwc":
            return y.permute(0, 3, 1, 2)  # [B, H, W, C] -> [B, C, H, W]
        if lay == "tokens":
            return _tokens_to_map(y[:, int(p.receiver_cls):], p.grid)  # [B, D, H, W]
        return y

    def finish(self, z: torch.Tensor) -> torch.Tensor:
        """Core output [B, C_out, ...] -> the receiver's layout [B, *receiver.shape]."""
        p, lay = self.plan, self.receiver.layout
        if p.form in ("pass", "vec"):
            return z
        if p.form == "seq":
            return z.transpose(1, 2).contiguous()  # [B, D, N] -> [B, N, D]
        if lay == "map_nhwc":
            return z.permute(0, 2, 3, 1).contiguous()  # [B, C, H, W] -> [B, H, W, C]
        if lay == "tokens":
            t = z.flatten(2).transpose(1, 2)  # [B, D, H, W] -> [B, H*W, D]
            if self.cls_offset is not None:
                lead = t.mean(dim=1, keepdim=True) + self.cls_offset.view(-1, t.shape[2])  # [B, P, D]
                t = torch.cat([lead, t], dim=1)  # [B, P + H*W, D]
            elif self.cls_fixed is not None:
                lead = self.cls_fixed.view(-1, t.shape[2]).expand(t.shape[0], -1, -1)  # [B, P, D]
                t = torch.cat([lead, t], dim=1)  # [B, P + H*W, D]
            return t.contiguous()
        return z

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, *sender.shape] (sender layout) -> [B, *receiver.shape] (receiver layout)."""
        if self.plan.form == "pass":
            self._check(x, self.sender, "sender")
            return x
        z = self.bn_before(self.prepare(x))  # [B, C_in, ...]
        z = self.bn_after(self.core(z))  # [B, C_out, ...]
        return self.finish(z)


def build_adapter(spec: AdapterSpec | None, sender: Cut, receiver: Cut) -> Adapter:
    """Adapter for the pair, AdapterError(reason) if none; lstsq/procrustes inits need fits.fit_adapter."""
    spec = spec if spec is not None else AdapterSpec()
    adapter = Adapter(spec, sender, receiver, _plan(spec, sender, receiver))
    logger.debug("built %s adapter %s -> %s (%s)", spec.kind, _fmt(sender), _fmt(receiver), adapter.plan.form)
    return adapter


@torch.no_grad()
def larger_map_refusal(suffix: nn.Module, adapter: Adapter, device: torch.device) -> str | None:
    """None when ``adapter`` hands B its receiver's own grid, or when B's rest after the receiver cut (``suffix``)
    runs on the adapter's larger (No Downsample) map and still gives one row of logits; else why not (a flatten
    into a fixed Linear, a fixed grid ...), in one line."""
    if adapter.plan.out_grid is None:
        return None
    x = torch.zeros(2, *adapter.sender.shape, device=device)  # [2, *sender.shape]
    was = adapter.training
    adapter.eval()
    try:
        out = suffix(adapter(x))  # [2, classes] when B's rest is fully convolutional up to a global pooling
        ok = isinstance(out, torch.Tensor) and out.dim() == 2 and out.shape[0] == 2
        why = None if ok else f"gives {list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}"
    except (RuntimeError, ValueError, AssertionError) as e:  # shape errors of fixed-size layers
        why = str(e).splitlines()[0][:120]
    finally:
        adapter.train(was)
    if why is None:
        return None
    (h, w), name = adapter.plan.out_grid, adapter.receiver.name
    return (f"No Downsample: B's layers after {name} do not take the sender's {h}x{w} map ({why}); it needs B's "
            "rest to be convolutional up to a global pooling (a ResNet)")


def adapter_cost(adapter: Adapter, batch: int = 1) -> tuple[int, int]:
    """(trainable parameters, FLOPs per example) of an eval forward; FLOPs as ``FlopCounterMode``
    counts them (2 per multiply-add of matmuls and convs; not BatchNorm, pooling or resampling)."""
    params = sum(p.numel() for p in adapter.parameters() if p.requires_grad)
    if adapter.plan.form == "pass":
        return params, 0
    device = next((p.device for p in adapter.parameters()), "cpu")
    x = torch.zeros(batch, *adapter.sender.shape, device=device)
    was_training = adapter.training
    adapter.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            adapter(x)  # [batch, *sender.shape] -> [batch, *receiver.shape]
    finally:
        adapter.train(was_training)
    return params, counter.get_total_flops() // batch
