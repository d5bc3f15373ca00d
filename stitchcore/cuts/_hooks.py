"""Forward-hook fallback of :mod:`stitchcore.cuts`, for models torch.fx cannot trace.

Cuts are the outputs of known block lists, found with forward hooks in one eval
forward: timm ``feature_info`` modules, items of ``blocks`` / ``stages`` /
``layers`` / ``layer`` / ``h`` lists (HF ``transformer.h``, ``model.layers`` ...).
Without a graph nothing proves such a point is the only live tensor, so only
structures known to be sequential can be split: HF GPT-2 style language models
(``transformer.wte/wpe/drop/h/ln_f`` + ``lm_head``, also wrapped as ``model.hf``).
Their prefix runs the real model up to the cut (a hook stops the forward); their
suffix re-runs the blocks after the cut, ``ln_f`` and ``lm_head`` and returns the
logits [B, T, V].  Every split is checked against ``model(example_input)``.
"""

from __future__ import annotations

import logging
import weakref

import torch
from torch import nn

from stitchcore.cuts._fx import LAYOUT_BY_RANK, Site, eval_mode, map_layout, outputs_match, with_aliases
from stitchcore.cuts._naming import BLOCK_LISTS, choose_name
from stitchcore.cuts.record import record
from stitchcore.errors import CutError
from stitchcore.models.gpt2 import block_kwargs, causal_mask, gpt2_root

log = logging.getLogger(__name__)


def _candidate_modules(model: nn.Module) -> list[str]:
    """Names of the modules whose outputs may be cuts (unordered; the forward orders them)."""
    gpt2 = gpt2_root(model)
    if gpt2 is not None:
        p, lm = gpt2
        return [f"{p}transformer.drop"] + [f"{p}transformer.h.{i}" for i in range(len(lm.transformer.h))] + [
            f"{p}transformer.ln_f"]
    names: list[str] = []
    info = getattr(model, "feature_info", None)
    if isinstance(info, (list, tuple)):
        names += [e["module"] for e in info if isinstance(e, dict) and e.get("module")]
    for qn, mod in model.named_modules():
        if qn.rsplit(".", 1)[-1] in BLOCK_LISTS and isinstance(mod, (nn.ModuleList, nn.Sequential)):
            names += [f"{qn}.{k}" for k, _ in mod.named_children()]
    return list(dict.fromkeys(names))


class HookPlan:
    """Cuts found by hooks on block lists; :meth:`split` works for GPT-2 style models only."""

    def __init__(self, model: nn.Module, example_input: torch.Tensor, reason: str) -> None:
        self._model_ref = weakref.ref(model)  # weak: plans are cached under weak model keys
        self._reason = reason  # why torch.fx failed, for error messages
        self._example = example_input
        cls = type(model).__name__
        names = _candidate_modules(model)
        if not names:
            raise CutError(f"cannot find cuts in {cls}: torch.fx could not trace it ({reason}) and it has no "
                           "known block list (timm feature_info, blocks, stages, layers, HF transformer.h); "
                           "make its forward traceable or give it an nn.Sequential / ModuleList of blocks")
        with eval_mode(model), record(model, names) as seen:  # {name: first output [B, ...]}
            model(example_input)
        by_tensor: dict[int, list[str]] = {}
        for name, out in seen.items():  # hook order = order in which the modules finished
            if isinstance(out, torch.Tensor) and out.is_floating_point() and out.dim() - 1 in LAYOUT_BY_RANK \
                    and out.shape[0] == example_input.shape[0]:
                by_tensor.setdefault(id(out), []).append(name)
        self.sites: list[Site] = []
        groups: dict[str, list[str]] = {}  # cut name -> every hooked module returning its tensor
        for group in by_tensor.values():
            name = choose_name(model, group)
            if name is None:
                continue
            shape = tuple(seen[name].shape[1:])
            layout = LAYOUT_BY_RANK[len(shape)]
            if layout == "map":
                layout = map_layout(model, group, shape, None)
            self.sites.append(Site(name, shape, layout))
            groups[name] = group
        self.sites = with_aliases(model, self.sites, groups)
        log.info("%s: %d cuts from block-list hooks", cls, len(self.sites))

    def split(self, name: str) -> tuple[nn.Module, nn.Module]:
        model = self._model_ref()
        gpt2 = gpt2_root(model)
        if gpt2 is None:
            raise CutError(f"cannot split {type(model).__name__} at {name}: torch.fx could not trace it "
                           f"({self._reason}) and no block-list fallback knows its structure")
        _, lm = gpt2
        stage = _candidate_modules(model).index(name)  # 0 embeddings, 1..L blocks, L+1 ln_f, L+2 head
        prefix = _HookPrefix(model, name)
        suffix = _GPT2Part(lm, start=stage + 1, stop=len(lm.transformer.h) + 3)
        with eval_mode(model):
            want = model(self._example)
            got = suffix(prefix(self._example))
        if not outputs_match(getattr(want, "logits", want), got):
            raise CutError(f"cannot split {type(model).__name__} at {name}: the GPT-2 splitter does not "
                           "reproduce its output (is forward(idx) -> logits?); make it traceable by torch.fx")
        return prefix, suffix


class _HookPrefix(nn.Module):
    """``x`` -> the output of module ``cut`` (first element where it returns a tuple).

    Runs ``model`` with a temporary hook that records the cut and stops the forward.
    """

    def __init__(self, model: nn.Module, cut: str) -> None:
        super().__init__()
        self.model = model  # shared, not copied
        self.cut = cut  # module path whose output is returned

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with record(self.model, [self.cut], stop_at=self.cut) as seen:
            self.model(x)  # ids [B, T]; ends at the cut
        return seen.require(self.cut)  # [B, T, D]


class _GPT2Part(nn.Module):
    """Stages ``start..stop-1`` of a GPT-2 LM: 0 embeddings (ids [B,T] -> [B,T,D]),
    1..L blocks ([B,T,D]), L+1 ``ln_f``, L+2 ``lm_head`` ([B,T,D] -> logits [B,T,V])."""

    def __init__(self, lm: nn.Module, start: int, stop: int) -> None:
        super().__init__()
        tr = lm.transformer
        n_layer = len(tr.h)
        self.config = tr.config  # HF config: attention implementation, mask rules
        self.embed = start == 0  # whether the input is token ids
        if self.embed:
            self.wte, self.wpe, self.drop = tr.wte, tr.wpe, tr.drop
        self.blocks = nn.ModuleList(list(tr.h)[max(start, 1) - 1:max(min(stop, n_layer + 1) - 1, 0)])
        self.ln_f = tr.ln_f if start <= n_layer + 1 < stop else None
        self.lm_head = lm.lm_head if start <= n_layer + 2 < stop else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(x.shape[1], device=x.device).unsqueeze(0)  # [1, T]
        h = self.drop(self.wte(x) + self.wpe(pos)) if self.embed else x  # [B, T, D]
        if len(self.blocks):
            mask = causal_mask(self.config, h, pos)
            for block in self.blocks:
                out = block(h, **block_kwargs(block, mask, pos))
                h = out[0] if isinstance(out, tuple) else out  # [B, T, D]
        if self.ln_f is not None:
            h = self.ln_f(h)
        if self.lm_head is not None:
            h = self.lm_head(h)  # [B, T, V]
        return h
