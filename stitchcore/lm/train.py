"""Training an adapter inside a joined language model (the rest frozen, in eval mode).

Objectives as for image stitches (``task``, ``match``, ``kd``), AdapterTargets' LM counterpart:
next-token cross-entropy through the frozen top, MSE to B's own residual stream, or KL to a
teacher's logits.  Batches are random windows of the training ids (:func:`stitchcore.data.text.lm_batches`).

**Training to convergence** (:class:`Convergence`): the last ``TUNE_FRACTION`` of the *training* ids is
held out (:func:`split_tune`; the validation text the results report is never looked at).  Every
``every`` steps the joined model's next-token loss on fixed windows of that part is measured; training
stops after ``patience`` checks in a row without a relative improvement above ``tol`` over the best so
far, or at the step cap, and the best checked adapter (step 0 included) is put back.

>>> split_tune(torch.arange(100))[1].tolist()[:3]
[90, 91, 92]
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from stitchcore.data.text import lm_batches
from stitchcore.lm.parts import ComposedLM
from stitchcore.stitching.train import check_finite, cosine_schedule, make_optimizer

__all__ = ["TUNE_FRACTION", "TUNE_WINDOWS", "Convergence", "split_tune", "train_lm_adapter"]

TUNE_FRACTION = 0.1  # the last 10% of the training ids: held out to stop training and to choose the start
TUNE_WINDOWS = 64  # fixed windows of that part the held-out loss is measured on


def split_tune(train_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Training ids [N] -> (fit [N - n], held out [n]): the last ``TUNE_FRACTION`` is held out."""
    n = max(2, int(len(train_ids) * TUNE_FRACTION))
    return train_ids[:-n], train_ids[-n:]


@dataclass
class Convergence:
    """The stopping rule of :func:`train_lm_adapter` and what it saw.

    ``score()`` is the joined model's loss on held-out train windows (never the reported validation).
    """

    score: Callable[[], float]  # held-out next-token loss of the model as it stands (nats / token)
    every: int = 50  # steps between checks
    patience: int = 4  # checks in a row without a relative improvement > tol: stop
    tol: float = 1e-3  # relative improvement that counts: new < best * (1 - tol)
    history: list[tuple[int, float]] = field(default_factory=list)  # (step, held-out loss) of every check
    best_step: int = 0  # the step whose adapter was kept
    best: float = float("inf")  # its held-out loss
    stopped_at: int = 0  # the last step trained

    def converged(self, cap: int) -> bool:
        """Whether it stopped on the rule (not at the step cap)."""
        return self.stopped_at < cap


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
    until: Convergence | None = None,
    batches: Iterable[tuple[Any, torch.Tensor]] | None = None,
) -> list[float]:
    """Train the adapter at part index ``k`` of ``model`` (the rest stays frozen, in eval mode).

    Objectives: ``task`` next-token cross-entropy; ``match`` MSE of the adapter's output to
    ``receiver(x)`` (B's own stream at the receiving position, [B, T, D_B]); ``kd`` KL to the
    ``teacher``'s logits.  AdamW/cosine (over ``steps``) as the image stitch.  With ``until`` training
    stops by its rule (``steps`` is then the cap) and the best checked adapter is kept.  ``batches`` (inputs the
    model reads, targets [B, T] with -100 where there is none) replaces the random windows of ``train_ids``: a
    cross-tokenizer stitch's (:mod:`stitchcore.lm.cross`).  Returns the loss per step.
    """
    params = [p for p in adapter.parameters() if p.requires_grad]
    if steps <= 0 or not params:
        return []
    model.eval()
    adapter.to(device).train()
    opt = make_optimizer(params, "adamw", lr, weight_decay)
    sched = cosine_schedule(opt, steps)
    losses: list[float] = []
    best_state, waited = None, 0
    if until is not None:
        best_state = _checked(adapter, until, 0)
        until.best, until.best_step = until.history[-1][1], 0
    source = lm_batches(train_ids, block_size, batch_size, seed, steps) if batches is None else batches
    for step, (x, y) in enumerate(source, start=1):
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
        if until is not None and (step % until.every == 0 or step == steps):
            state = _checked(adapter, until, step)
            now = until.history[-1][1]
            if now < until.best * (1 - until.tol):
                best_state, waited, until.best, until.best_step = state, 0, now, step
            else:
                waited += 1
            if waited >= until.patience:
                break
    if until is not None:
        until.stopped_at = len(losses)
        adapter.load_state_dict(best_state)
    adapter.eval()
    return losses


def _checked(adapter: nn.Module, until: Convergence, step: int) -> dict[str, torch.Tensor]:
    """Score the model on the held-out windows (adapter in eval mode), record it; the adapter's state."""
    adapter.eval()
    until.history.append((step, float(until.score())))
    adapter.train()
    return copy.deepcopy(adapter.state_dict())
