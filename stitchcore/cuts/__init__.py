"""Cut points: discover where a model can be cut in two, then split it there.

Discover, then select (as torchvision's ``get_graph_node_names`` /
``create_feature_extractor``): :func:`list_cuts` names every cut, :func:`split`
returns ``(prefix, suffix)`` with ``suffix(prefix(x)) == model(x)``.

Every function takes the model whole: a :class:`~stitchcore.models.loaded.LoadedModel` (or anything
with ``.model`` and ``.example_input()``) knows both the module and the input it is traced with; a bare
``nn.Module`` takes its ``example_input`` batch ([B, ...]) as the last argument.

>>> import torch, torchvision
>>> model = torchvision.models.resnet18(weights=None)
>>> x = torch.randn(2, 3, 64, 64)
>>> [c.name for c in list_cuts(model, x)][:6]
['conv1', 'bn1', 'relu', 'maxpool', 'layer1.0', 'layer1.1']
>>> prefix, suffix = split(model, "layer2.1", x)
>>> prefix(x).shape
torch.Size([2, 128, 8, 8])
>>> get_cut(model, "layer2", x).name, resolve_cut_name(model, "layer2", x)  # a stage is its last block
('layer2.1', 'layer2.1')
>>> from stitchcore.models.loaded import LoadedModel
>>> m = LoadedModel("torchvision:resnet18", model, "image", (3, 64, 64), preprocess=None, num_classes=1000)
>>> get_cut(m, "layer2").name, len(list_cuts(m)) == len(list_cuts(model, x))
('layer2.1', True)

**What is a cut.**  The model is traced with torch.fx in eval mode (timm and
torchvision leaf modules / wrapped functions are honoured).  A graph node is a cut
when it is the only live tensor: nothing that depends on the input and was
computed before it is read after it, so a residual skip never straddles a cut.
Of those nodes, a cut must also be

- the output of a module call (functions like ``torch.flatten`` are not cuts),
- a floating tensor of rank 2, 3 or 4 whose first dim is the batch,
- not the model output itself (nothing would follow it; the last pre-head
  features, e.g. ``avgpool`` / ``norm`` / ``ln_f``, are the last cut).

**Naming.**  A cut's name is the qualified path of the outermost module whose
output is that node, where a positional ``nn.Sequential`` is transparent (its last
item names the node instead: ``layer1.1``, never ``layer1``) and ``nn.Identity``
names nothing; a Sequential with named children (``fc1 = Sequential(OrderedDict(
linear=..., relu=...))``) is a block named ``fc1``.  Names inside another cut are
dropped unless they are block-list items (items of a ModuleList, or of a Sequential
called blocks/stages/layers/layer/h or holding 2+ modules of one class):
``layers.0.blocks.0`` stays inside ``layers.0``; ``fc1.linear`` never shows.
A module called at several cut points gets ``name``, ``name:1``, ``name:2`` ...
There is no second spelling in specs, caches and run ids: the same string is used there.

**Aliases.**  Any other module whose output is the very same graph node (the same
tensor) is an alias of the cut: ``layer2`` (the stage, the name papers use) for
``layer2.1`` (its last block), ``layer2.1.relu:1`` (the block's second ReLU call).
``Cut.aliases`` lists them, outermost first; :func:`get_cut`, :func:`split`,
:func:`split_segment` accept them and :func:`resolve_cut_name` turns one into the
canonical name, which is what callers store.

**Layout** (per sample ``shape`` drops the batch dim): rank 1 -> ``vector`` (D,);
rank 2 -> ``tokens`` (N, D); rank 3 -> ``map`` (C, H, W) or ``map_nhwc`` (H, W, C).
NHWC is decided by, in order: an ``output_fmt`` attribute of the producing module
(timm ``PatchEmbed``), the ``num_chs`` of the enclosing timm ``feature_info`` stage
(Swin ``layers.N`` -> map_nhwc, ConvNeXt ``stages.N`` -> map), the nearest upstream
conv/batch-norm (channel first) or linear/layer-norm (channel last), and last
square spatial dims.

**Depth** is ``(i + 1) / n`` for the i-th of n cuts in execution order (last = 1.0).

**Fallback.**  When fx cannot trace a model, cuts come from forward hooks on known
block lists (timm ``feature_info`` modules, ``blocks`` / ``stages`` / ``layers``,
HF ``transformer.h`` / ``model.layers`` ...); only HF GPT-2 style models can then
be split (see :mod:`stitchcore.cuts._hooks`).  The traced graph is always checked
against the model's own forward on ``example_input``.

``prefix`` and ``suffix`` share modules and parameters with ``model`` (no copies);
listing and splitting leave ``model`` as found: training flags restored, no hooks.
The graph is traced in eval mode: train-only branches of ``forward`` are not kept.

**Recording** many cuts from one forward pass goes through the context manager
:func:`stitchcore.cuts.record.record` (hooks removed and train flags restored on exit).
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import nn

from stitchcore.cuts._fx import FxPlan, Site, TraceFailed
from stitchcore.cuts._hooks import HookPlan
from stitchcore.cuts._naming import close_names, parse_call
from stitchcore.errors import CutError

__all__ = ["Cut", "Traceable", "coarse_cuts", "list_cuts", "model_cuts", "get_cut", "resolve_cut_name", "alias_note",
           "split", "split_segment"]

log = logging.getLogger(__name__)

LAYOUTS = ("map", "map_nhwc", "tokens", "vector")


@dataclass(frozen=True)
class Cut:
    """A place where a model can be cut in two; the contract between models and adapters."""

    name: str  # canonical module-boundary name: "layer2.1", "blocks.3", "hf.transformer.h.0", "fc1"
    shape: tuple[int, ...]  # activation shape without batch: (C,H,W) | (H,W,C) | (N,D) | (D,)
    layout: str  # "map" [B,C,H,W] | "map_nhwc" [B,H,W,C] | "tokens" [B,N,D] | "vector" [B,D]
    depth: float  # (i + 1) / n for the i-th of n cuts in execution order; the last cut is 1.0
    # other module names whose output is this very tensor, outermost first ("layer2" for "layer2.1");
    # naming information only: two Cuts that differ only here are equal
    aliases: tuple[str, ...] = field(default=(), compare=False)
    # tokens before the patch grid in a ``tokens`` cut (class + register tokens: DINOv2 with registers has 5), as
    # the model declares them (timm's ``num_prefix_tokens``); None: not declared, adapters read N = s*s or s*s + 1
    prefix_tokens: int | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """What a run's summary keeps of the cut (``prefix_tokens`` only where the model declares it).

        >>> Cut("blocks.1", (21, 8), "tokens", 0.5, prefix_tokens=5).to_dict()["prefix_tokens"]
        5
        """
        d = {"name": self.name, "shape": list(self.shape), "layout": self.layout, "depth": self.depth}
        return d if self.prefix_tokens is None else {**d, "prefix_tokens": self.prefix_tokens}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cut:
        """The cut a summary's dict (:meth:`to_dict`) describes."""
        return cls(d["name"], tuple(d["shape"]), d["layout"], d["depth"], prefix_tokens=d.get("prefix_tokens"))

    @property
    def outer_aliases(self) -> tuple[str, ...]:
        """The aliases worth a label: not modules inside the cut itself (``layer2``, not ``layer2.1.relu:1``).

        >>> Cut("layer2.1", (8, 4, 4), "map", 0.5, aliases=("layer2", "layer2.1.relu:1")).outer_aliases
        ('layer2',)
        """
        inside = parse_call(self.name)[0] + "."
        return tuple(a for a in self.aliases if not a.startswith(inside))


# Plans are cached per live model (weak keys: a dropped model frees its plans) and per
# input signature; the key also fingerprints every submodule, parameter and buffer object,
# so replacing a layer or a parameter re-traces.  In-place weight updates need no re-trace.
_CACHE: weakref.WeakKeyDictionary[nn.Module, dict[tuple, FxPlan | HookPlan]] = weakref.WeakKeyDictionary()
_CACHE_LOCK = threading.Lock()
_CACHE_PER_MODEL = 4  # input signatures kept per model


def _fingerprint(model: nn.Module, example_input: torch.Tensor) -> tuple:
    mods = tuple((n, id(m)) for n, m in model.named_modules())
    tensors = tuple(id(t) for t in model.parameters()) + tuple(id(t) for t in model.buffers())
    x = example_input
    return (tuple(x.shape), x.dtype, str(x.device), hash(mods), hash(tensors))


def _plan(model: nn.Module, example_input: torch.Tensor) -> FxPlan | HookPlan:
    """The traced (or hooked) plan of ``model`` for inputs shaped like ``example_input``."""
    if not isinstance(model, nn.Module):
        raise CutError(f"expected a torch nn.Module, got {type(model).__name__}; load the model first")
    if not isinstance(example_input, torch.Tensor):
        raise CutError("example_input must be a tensor batch (e.g. [2, 3, 64, 64]), "
                       f"got {type(example_input).__name__}")
    key = _fingerprint(model, example_input)
    with _CACHE_LOCK:
        plan = _CACHE.get(model, {}).get(key)
    if plan is not None:
        return plan
    try:
        plan = FxPlan(model, example_input)
    except TraceFailed as exc:
        reason = str(exc)
        log.info("torch.fx could not trace %s (%s); trying block-list hooks", type(model).__name__, reason)
        plan = HookPlan(model, example_input, reason)
    if not plan.sites:
        raise CutError(f"found no cut in {type(model).__name__}: no module output is the only live tensor; "
                       "cut a model built from blocks (nn.Sequential, timm, torchvision, HF GPT-2)")
    with _CACHE_LOCK:
        plans = _CACHE.setdefault(model, {})
        if len(plans) >= _CACHE_PER_MODEL:
            plans.pop(next(iter(plans)))
        plans[key] = plan
    return plan


class Traceable(Protocol):
    """A model with the input it is traced with: what the cut functions take (a LoadedModel is one)."""

    model: nn.Module

    def example_input(self) -> torch.Tensor: ...  # [B, ...] shaped like the model's data


Model = Traceable | nn.Module  # a bare module takes its example_input beside it


def _unpack(m: Model, example_input: torch.Tensor | None) -> tuple[nn.Module, torch.Tensor]:
    """``(module, example input)`` of a Traceable, or of a bare module and the batch given with it."""
    if isinstance(m, nn.Module):
        if example_input is None:
            raise CutError(f"a bare {type(m).__name__} needs its example_input batch (e.g. [2, 3, 64, 64]); "
                           "or pass the LoadedModel")
        return m, example_input
    if example_input is not None:
        return m.model, example_input
    if not callable(getattr(m, "example_input", None)) or not hasattr(m, "model"):
        raise CutError(f"expected a LoadedModel or a torch nn.Module, got {type(m).__name__}; load the model first")
    return m.model, m.example_input()


def _check_name(name: object) -> None:
    if isinstance(name, torch.Tensor):
        raise CutError("the cut name comes before the example input: get_cut(model, name, example_input)")


def _prefix_tokens(model: nn.Module, site: Site) -> int | None:
    """The leading non-grid tokens of a token cut the model declares (timm ViTs: ``num_prefix_tokens``), when the
    rest is a square grid; None where the model declares none or the cut is not its token stream (a patch embed)."""
    declared = getattr(model, "num_prefix_tokens", None)
    if site.layout != "tokens" or not isinstance(declared, int) or declared < 1:
        return None
    rest = site.shape[0] - declared
    return declared if rest >= 1 and math.isqrt(rest) ** 2 == rest else None


def _to_cuts(sites: list[Site], model: nn.Module | None = None) -> list[Cut]:
    n = len(sites)
    return [Cut(s.name, s.shape, s.layout, round((i + 1) / n, 6), s.aliases,
                None if model is None else _prefix_tokens(model, s)) for i, s in enumerate(sites)]  # fmt: skip


def list_cuts(m: Model, example_input: torch.Tensor | None = None) -> list[Cut]:
    """Every cut of the model in execution order, shapes as seen for its example input ([B, ...]).

    Raises :class:`CutError` for a model that fx cannot trace and that has no known block list.
    """
    model, x = _unpack(m, example_input)
    return _to_cuts(_plan(model, x).sites, model)


def coarse_cuts(cuts: list[Cut], n: int = 6) -> list[Cut]:
    """At most ``n`` cuts spread evenly over depth, the last cut always included (a "coarse" matrix).

    >>> [c.name for c in coarse_cuts([Cut(f"l{i}", (4,), "vector", (i + 1) / 10) for i in range(10)], 4)]
    ['l0', 'l3', 'l6', 'l9']
    """
    if n < 1:
        raise CutError("a coarse cut set needs at least one cut")
    if len(cuts) <= n:
        return list(cuts)
    if n == 1:
        return [cuts[-1]]
    picks = sorted({round(i * (len(cuts) - 1) / (n - 1)) for i in range(n)})
    return [cuts[i] for i in picks]


def get_cut(m: Model, name: str, example_input: torch.Tensor | None = None) -> Cut:
    """The cut called ``name`` or aliased ``name`` (``layer2`` -> the ``layer2.1`` Cut);
    :class:`CutError` with the close names when there is none."""
    _check_name(name)
    model, example_input = _unpack(m, example_input)
    cuts = list_cuts(model, example_input)
    for cut in cuts:
        if cut.name == name:
            return cut
    for cut in cuts:
        if name in cut.aliases:
            return cut
    known = [n for c in cuts for n in (c.name, *c.aliases)]
    close = close_names(name, known) if isinstance(name, str) else []
    hint = f"close: {', '.join(close)}" if close else f"cuts run from {cuts[0].name} to {cuts[-1].name}"
    if name in dict(model.named_modules()):
        hint = ("it is a module, but its output is the model output, lies inside a residual skip or a block, "
                f"or is not the output of any cut; {hint}")
    raise CutError(f"no cut '{name}' in this model ({type(model).__name__}); {hint}. "
                   "Hint: list the cuts with `python -m stitchcore cuts REF`")


def resolve_cut_name(m: Model, name: str, example_input: torch.Tensor | None = None) -> str:
    """The canonical name of the cut called or aliased ``name`` (``"layer2"`` -> ``"layer2.1"``).

    Callers resolve at the edges (CLI, URL, forms) so stored specs hold canonical names only.
    :class:`CutError` with the close names (aliases included) when ``name`` is no cut.
    """
    return get_cut(m, name, example_input).name


def alias_note(name: str, canonical: str) -> str | None:
    """``"layer2 = layer2.1"`` where a name was resolved to another canonical name, else None."""
    return None if name == canonical else f"{name} = {canonical}"


def split(m: Model, cut: Cut | str, example_input: torch.Tensor | None = None) -> tuple[nn.Module, nn.Module]:
    """Cut the model in two at ``cut``: ``prefix(x)`` -> activation, ``suffix(h)`` -> model output.

    ``prefix(x)`` returns the activation laid out as ``cut.layout`` says, e.g. [B, C, H, W]
    for ``map``; ``suffix(prefix(x))`` equals ``model(x)`` (eval mode).  Both share
    parameters with ``model``; ``model`` itself is not changed.
    """
    name = cut.name if isinstance(cut, Cut) else cut
    if not isinstance(name, str):
        raise CutError(f"a cut is a Cut or its name string, got {type(cut).__name__}")
    model, example_input = _unpack(m, example_input)
    plan = _plan(model, example_input)
    if name not in {s.name for s in plan.sites}:
        name = resolve_cut_name(model, name, example_input)  # an alias, or raises with the close names
    return plan.split(name)


def split_segment(m: Model, start: Cut | str, end: Cut | str, example_input: torch.Tensor | None = None
                  ) -> nn.Module:  # fmt: skip
    """The part of ``model`` between two cuts: activation at ``start`` -> activation at ``end``.

    With ``prefix, _ = split(model, start)`` and ``_, tail = split(model, end)``,
    ``tail(segment(prefix(x)))`` equals ``model(x)``.  Used for head-preserving
    stitches, C = A_tail(B_segment(S(A_prefix))).  Needs a torch.fx-traceable model.
    """
    model, example_input = _unpack(m, example_input)
    names = [c.name if isinstance(c, Cut) else c for c in (start, end)]
    names = [resolve_cut_name(model, n, example_input) for n in names]  # aliases; raises with close names
    plan = _plan(model, example_input)
    if not isinstance(plan, FxPlan):
        raise CutError(f"cannot take the segment {names[0]} -> {names[1]} of {type(model).__name__}: "
                       "torch.fx could not trace it; pick a traceable model")
    segment = plan.segment(*names)
    if segment is None:
        raise CutError(f"cut {names[1]!r} does not come after {names[0]!r}; the head cut must be deeper "
                       "than the receiver cut")
    return segment


def model_cuts(ref: str, store: Any = None) -> list[Cut]:
    """Every cut of the model ``ref`` names, in execution order (a zoo model from ``store``: a Store, its directory,
    or None for the default one).  Also ``stitchcore.cuts(ref)``.

    >>> [c.name for c in model_cuts("torchvision:resnet18?weights=none")][:5]
    ['conv1', 'bn1', 'relu', 'maxpool', 'layer1.0']
    """
    from stitchcore.models.sources import load_model
    from stitchcore.store.opened import open_store

    return list_cuts(load_model(ref, store=open_store(store) if store is not None or ref.startswith("zoo:") else None))


class _CallablePackage(types.ModuleType):
    """This package, called: ``stitchcore.cuts(ref)`` is :func:`model_cuts` (the notebook API's ``cuts``: a
    function of the package's own name would be hidden by the package once it is imported)."""

    def __call__(self, ref: str, store: Any = None) -> list[Cut]:
        return model_cuts(ref, store)


sys.modules[__name__].__class__ = _CallablePackage
