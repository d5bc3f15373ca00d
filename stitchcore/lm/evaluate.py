"""Scoring language models: validation loss, perplexity, loss penalty, samples.

**Loss penalty** (the GPT-2 stitching report): ``(L_base - L) / L_base`` with ``L`` the
validation next-token loss (nats) of the joined model and ``L_base`` that of the base model
(the one whose head is used).  A joined model that is worse than its base has a higher loss,
so its penalty is **negative**: -0.25 means a loss 25% above the base; 0 means as good.

>>> loss_penalty(2.0, 2.5)
-0.25

**Intervals** (95%, :mod:`stitchcore.measures.intervals`): the validation windows are the units resampled
(a window's tokens are not independent of each other), so :func:`lm_loss` also gives each window's mean loss
(``LMScore.per_window``); :func:`loss_penalty_ci` resamples the base model's and the joined model's windows
together (paired) and takes the penalty of the resampled mean losses.

>>> loss_penalty_ci(torch.tensor([2.0, 2.2, 1.8]), torch.tensor([2.5, 2.75, 2.25]))  # 25% worse everywhere
[-0.25, -0.25]
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from stitchcore.data.text import lm_batches
from stitchcore.errors import DataError
from stitchcore.lm.parts import TokenCodec
from stitchcore.measures.intervals import mean_ci, paired_statistic_ci

__all__ = [
    "EVAL_BATCH",
    "LMData",
    "LMScore",
    "eval_windows",
    "lm_data",
    "lm_loss",
    "loss_ci",
    "loss_penalty",
    "loss_penalty_ci",
    "sample_text",
]

log = logging.getLogger(__name__)

EVAL_BATCH = 32  # windows per forward pass when scoring
VAL_FRACTION = 0.1  # the last 10% of the corpus is validation text (as text.char_splits)


@dataclass
class LMData:
    """Token ids of one corpus under one vocabulary, split in train and validation."""

    text: str  # corpus name (text.load_text)
    train: torch.Tensor  # int64 [N]
    val: torch.Tensor  # int64 [M]
    prompt: str  # the fixed prompt for samples: the start of the validation text


def lm_data(text: str, codec: TokenCodec, prompt_chars: int = 24) -> LMData:
    """Load ``text`` and encode it with ``codec``; the last 10% is validation."""
    from stitchcore.data.text import load_text

    raw = load_text(text)
    cut = int(len(raw) * (1 - VAL_FRACTION))
    train, val = codec.encode(raw[:cut]), codec.encode(raw[cut:])
    if len(train) < 2 or len(val) < 2:
        raise DataError(f"text {text!r} is too short to split into train and validation; use a longer corpus")
    start = raw[cut:]
    line = re.search(rf"\n([A-Za-z][^\n]{{{prompt_chars},}})", start[:20000])  # a line of prose, not code
    prompt = line.group(1)[:prompt_chars] if line else start[:prompt_chars]
    return LMData(text, train, val, prompt)


def eval_windows(ids: torch.Tensor, block_size: int, n: int, seed: int = 1234) -> torch.Tensor:
    """``n`` fixed windows of ``block_size + 1`` tokens: int64 [n, T+1] (same windows for every model)."""
    if len(ids) < block_size + 2:
        raise DataError(f"{len(ids)} validation tokens are too few for windows of {block_size}; use a longer text")
    x, y = next(lm_batches(ids, block_size, n, seed, 1))
    return torch.cat([x, y[:, -1:]], dim=1)


class LMScore(dict):
    """{'loss': float, 'perplexity': float, 'accuracy': float} (a plain dict for JSON); ``.per_window``: float64
    [n], each validation window's mean next-token loss (what intervals resample; not part of the dict)."""

    per_window: torch.Tensor


@torch.no_grad()
def lm_loss(model: nn.Module, windows: torch.Tensor, device: torch.device,
            check_cancel: Callable[[], None] | None = None) -> LMScore:
    """Mean next-token cross-entropy (nats), perplexity and top-1 accuracy over ``windows`` [n, T+1]; each
    window's own mean loss as ``.per_window`` (every window has T targets: their mean is the loss)."""
    model.eval()
    total, correct, count = 0.0, 0, 0
    per_window = []
    for s in range(0, len(windows), EVAL_BATCH):
        if check_cancel is not None:
            check_cancel()
        w = windows[s:s + EVAL_BATCH].to(device)
        logits = model(w[:, :-1]).float()  # (B, T, V)
        y = w[:, 1:]  # (B, T)
        ce = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(y.shape)  # (B, T)
        total += ce.sum().item()
        per_window.append(ce.mean(1).double().cpu())  # (B,)
        correct += int((logits.argmax(-1) == y).sum())
        count += y.numel()
    loss = total / count
    score = LMScore(loss=round(loss, 6), perplexity=round(math.exp(min(loss, 50.0)), 4),
                    accuracy=round(correct / count, 6))  # fmt: skip
    score.per_window = torch.cat(per_window) if per_window else torch.zeros(0, dtype=torch.float64)
    return score


def loss_ci(per_window: torch.Tensor, seed: int = 0) -> list[float]:
    """95% interval [lo, hi] of the mean validation loss, the windows resampled (``LMScore.per_window``)."""
    return list(mean_ci(per_window, seed=seed))


def loss_penalty_ci(base_windows: torch.Tensor, windows: torch.Tensor, seed: int = 0) -> list[float]:
    """95% interval [lo, hi] of :func:`loss_penalty`, paired: each resample draws the same windows for the base
    model (``base_windows`` [n]) and the joined one (``windows`` [n]) and takes (L_base − L) / L_base of their
    resampled mean losses."""
    lo, hi = paired_statistic_ci(lambda base, joined: (base - joined) / base, base_windows, windows, seed=seed)
    return [lo + 0.0, hi + 0.0]  # + 0.0: never "-0.0"


def loss_penalty(base_loss: float, loss: float) -> float:
    """``(L_base - L) / L_base``: negative when the model is worse than its base (see the module docstring)."""
    return round((base_loss - loss) / base_loss, 6)


@torch.no_grad()
def sample_text(model: nn.Module, codec: TokenCodec, prompt: str, n_new: int, context: int, device: torch.device,
                seed: int = 0, temperature: float = 0.8) -> str:
    """``prompt`` continued by ``n_new`` tokens sampled at ``temperature`` with a seeded generator."""
    model.eval()
    idx = codec.encode(prompt)[None].to(device)  # (1, P)
    if idx.shape[1] == 0:
        idx = torch.zeros(1, 1, dtype=torch.int64, device=device)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    for _ in range(n_new):
        logits = model(idx[:, -context:])[0, -1].float().cpu()  # (V,)
        probs = torch.softmax(logits / max(temperature, 1e-4), dim=-1)
        nxt = torch.multinomial(probs, 1, generator=gen).to(device)
        idx = torch.cat([idx, nxt[None]], dim=1)
    return codec.decode(idx[0].tolist())
