"""torch.fx back end of :mod:`stitchcore.cuts`: trace, find single-live-tensor nodes, cut the graph.

Also holds the helpers both back ends share (:class:`Site`, the layout rules,
:func:`eval_mode`); the naming rule lives in :mod:`stitchcore.cuts._naming`.  Private:
use :func:`stitchcore.cuts.list_cuts` and :func:`stitchcore.cuts.split`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import math
import operator
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from stitchcore.cuts._naming import aliases_of, call_name, choose_name, drop_inner, parse_call

log = logging.getLogger(__name__)

LAYOUT_BY_RANK = {1: "vector", 2: "tokens", 3: "map"}  # rank without the batch dim -> layout


@dataclass(frozen=True)
class Site:
    """One cut found by a back end, before :mod:`stitchcore.cuts` adds its depth."""

    name: str  # canonical module path, ":k" appended for the k-th extra call of a shared module
    shape: tuple[int, ...]  # activation shape without the batch dim
    layout: str  # "map" | "map_nhwc" | "tokens" | "vector"
    aliases: tuple[str, ...] = ()  # other module names whose output is this very tensor, outermost first


class TraceFailed(Exception):
    """torch.fx could not trace the model, or its graph disagrees with the model (private)."""


# ----------------------------------------------------------------------------- shared helpers


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    """Put every submodule in eval mode under ``torch.no_grad`` and restore each flag on exit."""
    flags = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        for m, flag in flags:
            m.training = flag


def tensors_of(obj: Any) -> list[torch.Tensor]:
    """The tensors inside a (possibly nested) model output, in a fixed order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in tensors_of(v)]
    if isinstance(obj, (tuple, list)):
        return [t for v in obj for t in tensors_of(v)]
    return []


def outputs_match(a: Any, b: Any) -> bool:
    """True where two model outputs hold the same tensors (allclose, atol 1e-5)."""
    ta, tb = tensors_of(a), tensors_of(b)
    return len(ta) == len(tb) and all(
        x.shape == y.shape and torch.allclose(x.float(), y.float(), atol=1e-5, rtol=1e-4)
        for x, y in zip(ta, tb)
    )


def feature_channels(model: nn.Module, name: str) -> int | None:
    """``num_chs`` of the timm ``feature_info`` entry whose module is ``name`` or encloses it."""
    info = getattr(model, "feature_info", None)
    if isinstance(info, Sequence):
        best, best_len = None, -1
        for entry in info:
            mod = entry.get("module") if isinstance(entry, dict) else None
            if mod and (name == mod or name.startswith(mod + ".")) and len(mod) > best_len:
                best, best_len = entry.get("num_chs"), len(mod)
        return best
    return None


def map_layout(model: nn.Module, names: Sequence[str], shape: tuple[int, ...], hint: str | None) -> str:
    """Layout of a rank-3 (per sample) activation: ``map`` [C,H,W] or ``map_nhwc`` [H,W,C].

    Evidence in order: an ``output_fmt`` attribute on a module producing it (timm
    ``PatchEmbed``); timm ``feature_info`` ``num_chs`` of the enclosing stage; ``hint``
    (the nearest upstream conv / norm / linear on the graph, fx only); else square
    spatial dims decide ([C,S,S] -> map, [S,S,C] -> map_nhwc); else map.
    """
    for n in names:
        fmt = getattr(model.get_submodule(n), "output_fmt", None) if n else None
        if fmt is not None and "NHWC" in str(fmt):
            return "map_nhwc"
        if fmt is not None and "NCHW" in str(fmt):
            return "map"
    a, b, c = shape
    chs = feature_channels(model, names[0]) if names else None
    if chs is not None and c == chs != a:
        return "map_nhwc"
    if chs is not None and a == chs != c:
        return "map"
    if hint is not None:
        return hint
    if a == b != c:
        return "map_nhwc"
    return "map"


def with_aliases(model: nn.Module, sites: list[Site], calls: dict[str, Sequence[str]]) -> list[Site]:
    """``sites`` with their aliases: ``calls[site.name]`` names every module call returning its tensor.

    A name is an alias of one cut only (the first), never another cut's canonical name.
    """
    taken = {s.name for s in sites}
    out = []
    for s in sites:
        aliases = aliases_of(model, s.name, calls.get(s.name, ()), taken)
        taken.update(aliases)
        out.append(dataclasses.replace(s, aliases=aliases))
    return out


# ----------------------------------------------------------------------------- tracing

_CHANNEL_FIRST_MODULES = (nn.Conv2d, nn.ConvTranspose2d, nn.BatchNorm2d, nn.GroupNorm, nn.InstanceNorm2d,
                          nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)
_CHANNEL_LAST_MODULES = (nn.Linear, nn.LayerNorm)
_CHANNEL_FIRST_FUNCS = {F.conv2d, F.batch_norm, F.group_norm, F.max_pool2d, F.avg_pool2d,
                        F.adaptive_avg_pool2d}
_CHANNEL_LAST_FUNCS = {F.linear, F.layer_norm}
_INPLACE_FUNCS = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.iand, operator.ior}
_VIEW_METHODS = {"view", "reshape", "permute", "transpose", "flatten", "contiguous", "expand", "unsqueeze",
                 "squeeze", "narrow", "t", "__getitem__", "view_as"}


_PASSTHROUGH_MODULES = (nn.Identity, nn.Dropout, nn.Flatten)
_PASSTHROUGH_OPS = {"flatten", "view", "reshape", "contiguous", "squeeze", "dropout", "float", "to"}


def _op_name(node: fx.Node) -> str:
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")


# torch.fx patches nn.Module.__call__ / __getattr__ process-wide while it traces: one trace at
# a time, and module calls from other threads (a job training in a worker) pass straight through.
_TRACE_LOCK = threading.Lock()


class _CutTracer(fx.Tracer):
    """fx tracer that knows timm / torchvision leaf modules and records which modules return which node.

    Thread-safe in the way a server needs: calls made by other threads while this tracer's
    process-wide patches are active run the real module, untraced.
    """

    def __init__(self, leaf_types: tuple[type, ...], autowrap_functions: tuple[Callable, ...],
                 autowrap_modules: tuple[Any, ...]) -> None:
        super().__init__(autowrap_modules=autowrap_modules, autowrap_functions=autowrap_functions)
        self._leaf_types = leaf_types
        self._thread = threading.get_ident()  # the thread that traces; set again in trace()
        self.module_outputs: dict[fx.Node, list[str]] = {}  # node -> modules returning it, innermost first
        self.module_calls: dict[fx.Node, list[str]] = {}  # the same, as call names ("relu:1" = 2nd call)
        self._calls: dict[str, int] = {}  # module path -> calls traced so far

    def trace(self, root: Any, concrete_args: dict[str, Any] | None = None) -> fx.Graph:
        with _TRACE_LOCK:
            self._thread = threading.get_ident()
            return super().trace(root, concrete_args=concrete_args)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict[str, Any]) -> Any:
        if threading.get_ident() != self._thread:
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return isinstance(m, self._leaf_types) or super().is_leaf_module(m, module_qualified_name)

    def call_module(self, m: nn.Module, forward: Callable, args: tuple, kwargs: dict) -> Any:
        if threading.get_ident() != self._thread:  # another thread's forward pass: run it for real
            return forward(*args, **kwargs)
        out = super().call_module(m, forward, args, kwargs)
        path = self.path_of_module(m)
        call = self._calls.get(path, 0)
        self._calls[path] = call + 1
        if isinstance(out, fx.Proxy):
            self.module_outputs.setdefault(out.node, []).append(path)
            self.module_calls.setdefault(out.node, []).append(call_name(path, call))
        return out


def _tracer_for_loaded_libraries() -> _CutTracer:
    """A tracer with the leaf modules / wrapped functions of timm and torchvision, if they are imported.

    Only libraries already in ``sys.modules`` are consulted: a timm model means timm is loaded.
    """
    leaves: list[type] = []
    funcs: list[Callable] = []
    mods: list[Any] = [math]
    if "timm" in sys.modules:
        from timm.layers import get_notrace_functions, get_notrace_modules

        leaves += list(get_notrace_modules())
        funcs += list(get_notrace_functions())
    if "torchvision" in sys.modules:
        import torchvision.ops

        mods.append(torchvision.ops)
        classes = inspect.getmembers(torchvision.ops, inspect.isclass)
        leaves += [v for _, v in classes if issubclass(v, nn.Module)]
    return _CutTracer(tuple(leaves), tuple(funcs), tuple(mods))


def _concrete_args(model: nn.Module) -> dict[str, Any] | None:
    """Defaults of every forward parameter after the first, so ``if mask is None`` traces."""
    params = list(inspect.signature(model.forward).parameters.values())[1:]
    plain = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if any(p.default is p.empty for p in plain):
        raise TraceFailed("its forward needs more than one input")
    return {p.name: p.default for p in plain} or None


def _short(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= 120 else text[:117] + "..."


class FxPlan:
    """A traced model (eval mode, one input signature) with its cut nodes; :meth:`split` cuts it."""

    def __init__(self, model: nn.Module, example_input: torch.Tensor) -> None:
        self._model_ref = weakref.ref(model)  # weak: plans are cached under weak model keys
        tracer = _tracer_for_loaded_libraries()
        try:
            with eval_mode(model):
                graph = tracer.trace(model, concrete_args=_concrete_args(model))
                gm = fx.GraphModule(model, graph, class_name=type(model).__name__ + "Traced")
                meta = _run_and_record(gm, example_input)
                if not outputs_match(meta.pop("__output__"), model(example_input)):
                    raise TraceFailed("the traced graph disagrees with the model's forward")
        except TraceFailed:
            raise
        except Exception as exc:  # any tracing failure sends the caller to the hook fallback
            raise TraceFailed(f"{type(exc).__name__}: {_short(exc)}") from exc
        self._graph = graph
        self._meta = meta  # node name -> (shape, is_floating)
        self._nodes: dict[str, fx.Node] = {}  # cut name -> node
        self.sites: list[Site] = self._find_sites(tracer.module_outputs, example_input.shape[0])
        self.sites = with_aliases(model, self.sites, {
            s.name: tracer.module_calls.get(self._nodes[s.name], []) for s in self.sites})

    @property
    def _model(self) -> nn.Module:
        model = self._model_ref()
        if model is None:  # pragma: no cover - callers hold the model
            raise RuntimeError("the model of this plan was garbage-collected")
        return model

    # -- discovery ------------------------------------------------------------------------------

    def _find_sites(self, module_outputs: dict[fx.Node, list[str]], batch: int) -> list[Site]:
        nodes = list(self._graph.nodes)
        index = {n: i for i, n in enumerate(nodes)}
        placeholders = [n for n in nodes if n.op == "placeholder"]
        dependent: set[fx.Node] = set(placeholders[:1])  # nodes that depend on the model input
        for n in nodes:
            if n.op != "placeholder" and any(a in dependent for a in n.all_input_nodes):
                dependent.add(n)
        live_until = -1  # latest use of any input-dependent node seen so far
        named: list[tuple[str, fx.Node]] = []
        for n in nodes:
            i = index[n]
            if n in dependent and n.op != "placeholder" and live_until <= i and n.op != "output":
                name = choose_name(self._model, module_outputs.get(n, []))
                shape, floating = self._meta.get(n.name, (None, False))
                if name and floating and len(shape) - 1 in LAYOUT_BY_RANK and shape[0] == batch \
                        and not self._is_output(n):
                    named.append((name, n))
            if n in dependent:
                live_until = max([live_until] + [index[u] for u in n.users])
        seen: dict[str, int] = {}
        unique: list[tuple[str, fx.Node]] = []
        for name, n in named:
            k = seen.get(name, 0)
            seen[name] = k + 1
            unique.append((call_name(name, k), n))
        kept = set(drop_inner(self._model, [name for name, _ in unique]))
        sites = []
        for name, n in unique:
            if name not in kept:
                continue
            shape = self._meta[n.name][0][1:]
            layout = LAYOUT_BY_RANK[len(shape)]
            if layout == "map":
                names = [parse_call(name)[0], *module_outputs[n]]
                layout = map_layout(self._model, names, shape, self._channel_hint(n))
            self._nodes[name] = n
            sites.append(Site(name, shape, layout))
        return sites

    def _is_output(self, node: fx.Node) -> bool:
        """True where only pass-through ops (Identity, Dropout, Flatten, views) follow ``node``."""
        stack, seen = [node], {node}
        while stack:
            for u in stack.pop().users:
                if u.op == "output" or u in seen:
                    continue
                passthrough = (u.op == "call_module" and isinstance(
                    self._model.get_submodule(str(u.target)), _PASSTHROUGH_MODULES)) or (
                    u.op in ("call_method", "call_function") and _op_name(u) in _PASSTHROUGH_OPS)
                if not passthrough:
                    return False
                seen.add(u)
                stack.append(u)
        return True

    def _channel_hint(self, node: fx.Node) -> str | None:
        """Walk back through same-shaped nodes to the nearest op whose channel axis is known."""
        shape = self._meta[node.name][0]
        queue, seen = [node], {node}
        while queue and len(seen) < 64:
            n = queue.pop(0)
            if n.op == "call_module":
                mod = self._model.get_submodule(str(n.target))
                if isinstance(mod, _CHANNEL_FIRST_MODULES):
                    return "map"
                if isinstance(mod, _CHANNEL_LAST_MODULES):
                    return "map_nhwc"
            elif n.op == "call_function" and n.target in _CHANNEL_FIRST_FUNCS:
                return "map"
            elif n.op == "call_function" and n.target in _CHANNEL_LAST_FUNCS:
                return "map_nhwc"
            for a in n.all_input_nodes:
                if a not in seen and self._meta.get(a.name, (None,))[0] == shape:
                    seen.add(a)
                    queue.append(a)
        return None

    # -- splitting ------------------------------------------------------------------------------

    def split(self, name: str) -> tuple[fx.GraphModule, fx.GraphModule]:
        """Prefix graph (input -> cut node) and suffix graph (cut value -> model output)."""
        cut = self._nodes[name]
        cls = type(self._model).__name__
        return self._prefix(cut, f"{cls}Prefix"), self._suffix(cut, f"{cls}Suffix")

    def segment(self, start: str, end: str) -> fx.GraphModule | None:
        """Graph from the value at cut ``start`` to the value at cut ``end``; None if ``end`` is not after it."""
        first, last = self._nodes[start], self._nodes[end]
        needed = _ancestors([last], stop=first)
        if first not in needed or first is last:
            return None
        graph = fx.Graph()
        h = graph.placeholder("h")
        if _mutates_in_place(first, self._model):
            h = graph.call_method("clone", (h,))
        env: dict[fx.Node, fx.Node] = {first: h}
        for n in self._graph.nodes:
            if n in needed and n is not first:
                env[n] = graph.node_copy(n, env.__getitem__)
        graph.output(env[last])
        graph.lint()
        return fx.GraphModule(self._model, graph, class_name=f"{type(self._model).__name__}Segment")

    def _prefix(self, cut: fx.Node, class_name: str) -> fx.GraphModule:
        needed = _ancestors([cut], stop=None)
        graph = fx.Graph()
        env: dict[fx.Node, fx.Node] = {}
        for n in self._graph.nodes:
            if n in needed:
                env[n] = graph.node_copy(n, env.__getitem__)
        graph.output(env[cut])
        graph.lint()
        return fx.GraphModule(self._model, graph, class_name=class_name)

    def _suffix(self, cut: fx.Node, class_name: str) -> fx.GraphModule:
        out_node = next(n for n in reversed(self._graph.nodes) if n.op == "output")
        needed = _ancestors([out_node], stop=cut)
        graph = fx.Graph()
        h = graph.placeholder("h")
        if _mutates_in_place(cut, self._model):
            h = graph.call_method("clone", (h,))  # the suffix must not write into the caller's tensor
        env: dict[fx.Node, fx.Node] = {cut: h}
        for n in self._graph.nodes:
            if n in needed and n is not cut:
                env[n] = graph.node_copy(n, env.__getitem__)
        graph.lint()
        return fx.GraphModule(self._model, graph, class_name=class_name)


def _ancestors(roots: list[fx.Node], stop: fx.Node | None) -> set[fx.Node]:
    """``roots`` and every node they read from, not looking past ``stop``."""
    seen: set[fx.Node] = set(roots)
    stack = list(roots)
    while stack:
        n = stack.pop()
        if n is stop:
            continue
        for a in n.all_input_nodes:
            if a not in seen:
                seen.add(a)
                stack.append(a)
    return seen


def _mutates_in_place(node: fx.Node, model: nn.Module) -> bool:
    """True where a reader of ``node`` (or of a view of it) writes into it."""
    stack, seen = [node], {node}
    while stack:
        for u in stack.pop().users:
            if u in seen:
                continue
            seen.add(u)
            if u.op == "call_module" and getattr(model.get_submodule(str(u.target)), "inplace", False):
                return True
            if u.op == "call_function" and (u.kwargs.get("inplace") is True or u.target in _INPLACE_FUNCS):
                return True
            target = str(u.target)
            if u.op == "call_method" and target.endswith("_") and not target.startswith("_"):
                return True
            if (u.op == "call_method" and target in _VIEW_METHODS) or u.target is operator.getitem:
                stack.append(u)
    return False


def _run_and_record(gm: fx.GraphModule, example_input: torch.Tensor) -> dict[str, Any]:
    """Run ``gm`` once; node name -> (shape, is floating tensor), plus ``__output__``."""
    meta: dict[str, Any] = {}

    class _Recorder(fx.Interpreter):
        def run_node(self, n: fx.Node) -> Any:
            value = super().run_node(n)
            if isinstance(value, torch.Tensor):
                meta[n.name] = (tuple(value.shape), value.is_floating_point())
            return value

    meta["__output__"] = _Recorder(gm).run(example_input)
    return meta
