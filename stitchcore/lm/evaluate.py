"""Scoring language models: validation loss, perplexity, loss penalty, samples; LM adapter training.

**Loss penalty** (the GPT-2 stitching report): ``(L_base - L) / L_base`` with ``L`` the
validation next-token loss (nats) of the joined model and ``L_base`` that of the base model
(the one whose head is used).  A joined model that is worse than its base has a higher loss,
so its penalty is **negative**: -0.25 means a loss 25% above the base; 0 means as good.

>>> loss_penalty(2.0, 2.5)
-0.25
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

from stitchcore.errors import DataError
from stitchcore.lm.parts import ComposedLM, TokenCodec
from stitchcore.data.text import lm_batches
from stitchcore.stitching.train import check_finite, cosine_schedule, make_optimizer

__all__ = [
    "EVAL_BATCH",
    "LMData",
    "eval_windows",
    "lm_data",
    "lm_loss",
    "loss_penalty",
    "sample_text",
    "train_lm_adapter",
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


@torch.no_grad()
def lm_loss(model: nn.Module, windows: torch.Tensor, device: torch.device,
            check_cancel: Callable[[], None] | None = None) -> dict[str, float]:
    """Mean next-token cross-entropy (nats), perplexity and top-1 accuracy over ``windows`` [n, T+1]."""
    model.eval()
    total, correct, count = 0.0, 0, 0
    for s in range(0, len(windows), EVAL_BATCH):
        if check_cancel is not None:
            check_cancel()
        w = windows[s:s + EVAL_BATCH].to(device)
        logits = model(w[:, :-1]).float()  # (B, T, V)
        y = w[:, 1:]
        total += F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum").item()
        correct += int((logits.argmax(-1) == y).sum())
        count += y.numel()
    loss = total / count
    return {"loss": round(loss, 6), "perplexity": round(math.exp(min(loss, 50.0)), 4),
            "accuracy": round(correct / count, 6)}


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


def train_lm_adapter(
    model: ComposedLM,
    k: int,
    adapter: nn.Module,
    train_ids: torch.Tensor,
    *,
    block_size: int,
    objective: dict[str, float],
    steps: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    seed: int,
    device: torch.device,
    receiver: Callable[[torch.Tensor], torch.Tensor] | None = None,
    teacher: nn.Module | None = None,
    kd_temperature: float = 2.0,
    on_step: Callable[[int, int, dict[str, float]], None] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> list[float]:
    """Train the adapter at part index ``k`` of ``model`` (the rest stays frozen, in eval mode).

    Objectives: ``task`` next-token cross-entropy; ``match`` MSE of the adapter's output to
    ``receiver(x)`` (B's own stream at the receiving position, [B, T, D_B]); ``kd`` KL to the
    ``teacher``'s logits.  AdamW/cosine as the image stitch.  Returns the loss per step.
    """
    params = [p for p in adapter.parameters() if p.requires_grad]
    if steps <= 0 or not params:
        return []
    model.eval()
    adapter.to(device).train()
    opt = make_optimizer(params, "adamw", lr, weight_decay)
    sched = cosine_schedule(opt, steps)
    losses: list[float] = []
    for step, (x, y) in enumerate(lm_batches(train_ids, block_size, batch_size, seed, steps), start=1):
        if check_cancel is not None:
            check_cancel()
        x, y = x.to(device), y.to(device)
        with torch.no_grad():
            h = model.residual(x, k)  # (B, T, D_A): the frozen bottom
        mid = adapter(h)  # (B, T, D_B)
        loss = torch.zeros((), device=device)
        if "match" in objective and receiver is not None:
            with torch.no_grad():
                target = receiver(x)
            loss = loss + objective["match"] * F.mse_loss(mid, target)
        if "task" in objective or "kd" in objective:
            logits = model.finish(mid, k + 1)  # (B, T, V)
            if "task" in objective:
                loss = loss + objective["task"] * F.cross_entropy(logits.flatten(0, 1), y.flatten())
            if "kd" in objective and teacher is not None:
                t = kd_temperature
                with torch.no_grad():
                    want = F.log_softmax(teacher(x).float() / t, dim=-1).flatten(0, 1)
                got = F.log_softmax(logits.float() / t, dim=-1).flatten(0, 1)
                loss = loss + objective["kd"] * F.kl_div(got, want, log_target=True, reduction="batchmean") * t * t
        check_finite(loss, step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if on_step is not None:
            on_step(step, steps, {"loss": losses[-1]})
    adapter.eval()
    return losses
