"""GPT-2 family helpers shared by the cut splitter and the language-model parts.

A transformers GPT-2 style LM has ``transformer.wte/wpe/drop/h/ln_f`` and ``lm_head`` (also
wrapped as ``model.hf``).  These helpers find it and run one of its blocks outside the
model's own forward: the causal mask the model would build, and the keyword arguments
the block's ``forward`` accepts.

>>> from torch import nn
>>> gpt2_root(nn.Linear(2, 2)) is None
True
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

__all__ = ["block_kwargs", "causal_mask", "gpt2_root"]


def gpt2_root(model: nn.Module) -> tuple[str, nn.Module] | None:
    """``(path prefix, HF LM)`` where ``model`` (or its ``.hf``) is a GPT-2 style LM, else None."""
    for prefix, lm in (("", model), ("hf.", getattr(model, "hf", None))):
        tr = getattr(lm, "transformer", None)
        if isinstance(lm, nn.Module) and isinstance(getattr(lm, "lm_head", None), nn.Module) and all(
            isinstance(getattr(tr, a, None), nn.Module) for a in ("wte", "wpe", "drop", "h", "ln_f")
        ):
            return prefix, lm
    return None


def causal_mask(config: Any, h: torch.Tensor, pos: torch.Tensor) -> Any:
    """The mask GPT-2 builds for an unpadded batch (None where attention is causal by itself)."""
    try:
        from transformers.masking_utils import create_causal_mask
    except ImportError:  # older transformers: GPT2Attention applies its own causal mask
        return None
    return create_causal_mask(config=config, inputs_embeds=h, attention_mask=None, past_key_values=None,
                              position_ids=pos)


def block_kwargs(block: nn.Module, mask: Any, pos: torch.Tensor) -> dict[str, Any]:
    """The keyword arguments of ``block.forward`` among attention_mask, use_cache, position_ids."""
    params = inspect.signature(block.forward).parameters
    open_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
    kwargs = {"attention_mask": mask, "use_cache": False, "position_ids": pos}
    return {k: v for k, v in kwargs.items() if open_kw or k in params}
