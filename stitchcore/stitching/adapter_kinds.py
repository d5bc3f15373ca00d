"""Adapter kinds: the core map between an adapter's BatchNorms, one registered class per kind.

A kind is an :class:`AdapterCore` subclass registered with ``@register_adapter(kind)``; it gets
the :class:`AdapterPlan` that :func:`stitchcore.stitching.adapters.build_adapter` resolved for a
pair of cuts and maps channel-first tensors [B, C_in, ...] -> [B, C_out, ...] in the plan's form.
The built-in kinds, in rising capacity: identity, linear, linear_relu, conv3x3_relu, bottleneck,
lowrank (Bansal et al.'s 1x1 conv / Linear; Traft & Cheney's complex adapters), then Bansal et al.'s
larger kernels conv3x3_linear, conv5x5_linear (registered last).

>>> list_adapters()
['identity', 'linear', 'linear_relu', 'conv3x3_relu', 'bottleneck', 'lowrank', 'conv3x3_linear', 'conv5x5_linear']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from stitchcore.errors import AdapterError
from stitchcore.registry import Registry
from stitchcore.stitching.layers import ChannelLinear, LowRankLinear

__all__ = [
    "AdapterCore",
    "AdapterPlan",
    "BottleneckCore",
    "Conv3x3ReluCore",
    "IdentityCore",
    "LinearCore",
    "LinearReluCore",
    "LowRankCore",
    "RescaleStep",
    "get_adapter",
    "list_adapters",
    "register_adapter",
]  # fmt: skip


# kind -> core class; the built-in kinds below register themselves when this module is imported
_ADAPTERS: Registry[type[AdapterCore]] = Registry("adapter kind", AdapterError)


def register_adapter(kind: str):
    """Class decorator: make an :class:`AdapterCore` subclass available as ``AdapterSpec(kind)``.

    A kind can be registered once (ValueError on the second time).
    """

    def deco(cls: type[AdapterCore]) -> type[AdapterCore]:
        if not (isinstance(cls, type) and issubclass(cls, AdapterCore)):
            raise TypeError(f"@register_adapter({kind!r}) decorates AdapterCore subclasses, got {cls!r}")
        _ADAPTERS.register(kind)(cls)
        cls.kind = kind
        return cls

    return deco


def list_adapters(pattern: str = "*") -> list[str]:
    """Registered kinds matching a glob ``pattern``, in registration order (rising capacity).

    >>> list_adapters("linear*")
    ['linear', 'linear_relu']
    """
    return _ADAPTERS.list(pattern)


def get_adapter(kind: str) -> type[AdapterCore]:
    """The core class registered as ``kind``; unknown: AdapterError naming the close kinds.

    >>> get_adapter("lowrank").__name__
    'LowRankCore'
    >>> get_adapter("linaer")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stitchcore.errors.AdapterError: unknown adapter kind 'linaer'; did you mean 'linear'? (known: ...
    """
    if not isinstance(kind, str):  # a list or dict would not even hash
        raise AdapterError(_ADAPTERS.unknown_message(kind))
    return _ADAPTERS.get(kind)


@dataclass(frozen=True)
class RescaleStep:
    """One step of a chained rescale (``AdapterSpec.rescale="chained"``): at most 2x per axis, one core each."""

    grid: tuple[int, int]  # the grid after this step
    resize: str | None = None  # F.interpolate mode applied before the step's core; None: no resize
    size: tuple[int, int] | None = None  # what ``resize`` produces: ``grid``, or 2 x ``grid`` before a stride-2 core
    antialias: bool = False  # bilinear with antialias (a step that is not an exact 2x: every input position counts)
    stride: tuple[int, int] = (1, 1)  # (2, 2) where the core halves the grid (resample='strided')


@dataclass(frozen=True)
class AdapterPlan:
    """How a pair of cuts is joined (resolved by build_adapter; the cores read it)."""

    form: str  # internal form: pass | map [B,C,H,W] | seq [B,D,N] | vec [B,D]
    c_in: int  # sender channels entering the core
    c_out: int  # receiver channels, what the core produces
    grid: tuple[int, int] | None = None  # receiver grid (map form)
    resize: str | None = None  # F.interpolate mode for prepare(); None: grids match or the core strides
    stride: tuple[int, int] = (1, 1)  # core stride for resample='strided' downsampling
    sender_cls: int = 0  # leading class (and register) tokens the sender's map drops (map form)
    receiver_cls: int = 0  # leading class (and register) tokens the adapter makes for the receiver (map form)
    rank: int | None = None  # lowrank width
    steps: tuple[RescaleStep, ...] = ()  # chained rescale: one core per step, in order; () = one core, one resize
    out_grid: tuple[int, int] | None = None  # resample='no_downsample': the grid handed to B (the sender's)

    @property
    def ndim(self) -> int:
        return {"map": 4, "seq": 3, "vec": 2, "pass": 0}[self.form]


class AdapterCore(nn.Module):
    """Base of the registered kinds: the map between the BatchNorms, [B, C_in, ...] -> [B, C_out, ...]."""

    kind: ClassVar[str] = ""  # set by @register_adapter
    forms: ClassVar[frozenset[str]] = frozenset({"map", "seq", "vec"})  # internal forms it runs on
    fittable: ClassVar[bool] = False  # has a ``linear`` (fits.ChannelLinear / LowRankLinear) fits can set
    identity_init: ClassVar[bool] = False  # supports init='identity' (then init_identity() is called)
    passthrough: ClassVar[bool] = False  # the identity/merge adapter: no conversion at all
    uses_rank: ClassVar[bool] = False  # reads AdapterSpec.rank
    # a linear map of its input (no nonlinearity): it commutes with a resize, so a chained rescale of such cores,
    # the later ones at identity, is the first core after every resize (a closed-form fit sets that one)
    linear_map: ClassVar[bool] = False

    def __init__(self, plan: AdapterPlan):
        super().__init__()
        self.plan = plan

    def init_identity(self) -> None:
        """Start as the identity; the default keeps the construction init (already identity-like)."""


@register_adapter("identity")
class IdentityCore(AdapterCore):
    """No parameters: the receiver gets the sender's tensor unchanged (the LM 'merge')."""

    passthrough = True
    identity_init = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


@register_adapter("linear")
class LinearCore(AdapterCore):
    """1x1 conv on maps, Linear on tokens and vectors (Bansal et al.)."""

    fittable = True
    identity_init = True
    linear_map = True
    relu: ClassVar[bool] = False  # ReLU after the linear map

    def __init__(self, plan: AdapterPlan):
        super().__init__(plan)
        self.linear = ChannelLinear(plan.c_in, plan.c_out, plan.ndim, plan.stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)  # [B, C_in, ...] -> [B, C_out, ...]
        return F.relu(h) if self.relu else h

    def init_identity(self) -> None:
        self.linear.init_identity()


@register_adapter("linear_relu")
class LinearReluCore(LinearCore):
    """Linear + ReLU (Traft & Cheney); closed-form fits set the linear part only."""

    relu = True
    linear_map = False


@register_adapter("conv3x3_relu")
class Conv3x3ReluCore(AdapterCore):
    """Conv3x3 (padding 1, stride = the strided ratio) + ReLU, maps only (Traft & Cheney)."""

    forms = frozenset({"map"})
    identity_init = True

    def __init__(self, plan: AdapterPlan):
        super().__init__(plan)
        self.conv = nn.Conv2d(plan.c_in, plan.c_out, 3, stride=plan.stride, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv(x))  # [B, C_in, H, W] -> [B, C_out, H/s, W/s]

    @torch.no_grad()
    def init_identity(self) -> None:
        self.conv.weight.zero_()
        self.conv.weight[:, :, 1, 1] = torch.eye(self.plan.c_out)  # centre tap
        self.conv.bias.zero_()


@register_adapter("bottleneck")
class BottleneckCore(AdapterCore):
    """ResNet bottleneck 1x1 -> 3x3 (stride) -> 1x1 with BN, width C_out // 4, + shortcut (input or 1x1+BN).

    The last BN starts at weight zero, so the core starts as its shortcut (the identity
    when channels match).  Unlike the authors' ResNetBottleneck (torchvision's block) there is no ReLU after
    the sum, on purpose: the core feeds ``bn_after`` and then receivers whose activations are signed (ViT and
    Swin tokens; with ``norm`` none or bn_before the core's output is the receiver's input itself), and a final
    ReLU would also break the identity start for signed inputs."""

    forms = frozenset({"map"})
    identity_init = True  # already one at construction when channels match

    def __init__(self, plan: AdapterPlan):
        super().__init__(plan)
        c_in, c_out, width, stride = plan.c_in, plan.c_out, max(1, plan.c_out // 4), plan.stride
        self.conv1, self.bn1 = nn.Conv2d(c_in, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, c_out, 1, bias=False), nn.BatchNorm2d(c_out)
        nn.init.zeros_(self.bn3.weight)
        self.shortcut: nn.Module | None = None
        if c_in != c_out or stride != (1, 1):
            conv = nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False)
            self.shortcut = nn.Sequential(conv, nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn1(self.conv1(x)))  # [B, width, H, W]
        h = F.relu(self.bn2(self.conv2(h)))  # [B, width, H/s, W/s]
        h = self.bn3(self.conv3(h))  # [B, C_out, H/s, W/s]
        return h + (x if self.shortcut is None else self.shortcut(x))


@register_adapter("lowrank")
class LowRankCore(AdapterCore):
    """Two linears C_in -> r -> C_out (rank r bottleneck, no nonlinearity)."""

    fittable = True
    uses_rank = True

    def __init__(self, plan: AdapterPlan):
        super().__init__(plan)
        self.linear = LowRankLinear(plan.c_in, plan.c_out, plan.ndim, plan.stride, plan.rank or 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)  # [B, C_in, ...] -> [B, r, ...] -> [B, C_out, ...]


class KxKLinearCore(AdapterCore):
    """A k x k linear conv ('same' padding, no ReLU), maps only: Bansal et al.'s stitching layer with a larger
    kernel (the kernel-size preset; k = 1 is ``linear``).  Registered as ``conv3x3_linear``, ``conv5x5_linear``."""

    forms = frozenset({"map"})
    identity_init = True
    size: ClassVar[int] = 3  # kernel side k (odd, so 'same' padding is k // 2 on every side)

    def __init__(self, plan: AdapterPlan):
        super().__init__(plan)
        self.conv = nn.Conv2d(plan.c_in, plan.c_out, self.size, stride=plan.stride, padding=self.size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)  # [B, C_in, H, W] -> [B, C_out, H/s, W/s]

    @torch.no_grad()
    def init_identity(self) -> None:
        self.conv.weight.zero_()
        self.conv.weight[:, :, self.size // 2, self.size // 2] = torch.eye(self.plan.c_out)  # centre tap
        self.conv.bias.zero_()


def _register_kxk_linear(sizes: tuple[int, ...] = (3, 5)) -> None:
    """Register ``conv{k}x{k}_linear`` for each odd k in ``sizes`` (a subclass of :class:`KxKLinearCore` each)."""
    for k in sizes:
        register_adapter(f"conv{k}x{k}_linear")(type(f"Conv{k}x{k}LinearCore", (KxKLinearCore,), {"size": k}))


_register_kxk_linear()
__all__ += ["KxKLinearCore"]
