"""Training an adapter inside a joined language model (the rest frozen, in eval mode).

Objectives as for image stitches (``task``, ``match``, ``kd``), AdapterTargets' LM counterpart:
next-token cross-entropy through the frozen top, MSE to B's own residual stream, or KL to a
teacher's logits.  Batches are random windows of the training ids (:func:`stitchcore.data.text.lm_batches`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from stitchcore.data.text import lm_batches
from stitchcore.lm.parts import ComposedLM
from stitchcore.stitching.train import check_finite, cosine_schedule, make_optimizer

__all__ = ["train_lm_adapter"]


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
