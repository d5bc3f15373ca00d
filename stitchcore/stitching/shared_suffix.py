"""Train many adapters that feed the same frozen receiver through one suffix pass per step.

A stitching matrix trains one adapter per (sender cut, receiver cut).  All the
adapters into one receiver end in the same frozen suffix of B, so each step
stacks their outputs along the batch axis and runs the suffix once: K small
forward/backward passes become one K-times larger pass, which on a CPU (and
even more on a GPU) costs far less than K passes of small, overhead-bound ops.

The result is the same as training each adapter alone with
:func:`stitchcore.stitching.train.train_adapter` (same seed, same batches, same
optimiser): the suffix is in eval mode, so every sample's logits depend only
on its own adapter, the summed loss gives each adapter exactly the gradient of
its own mean loss, and AdamW/SGD update each parameter element-wise.

:func:`frozen_for_training` makes the per-step suffix cheaper still: BatchNorm folded
into the convolution before it (exact in eval mode, up to float rounding) and
channels-last weights.  ``precision="bf16"`` runs adapter and suffix under bfloat16
autocast (fp32 master weights and loss): faster on GPUs and CPUs with AMX/AVX512-BF16,
slower on CPUs without them, so it is opt-in.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
from collections.abc import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from stitchcore.stitching.train import TrainKnobs, check_finite, cosine_schedule, make_optimizer
from stitchcore.stitching.precision import PRECISIONS

__all__ = ["PRECISIONS", "frozen_for_training", "train_adapters_shared_suffix"]

log = logging.getLogger(__name__)



def frozen_for_training(suffix: nn.Module) -> nn.Module:
    """A frozen eval-mode copy of ``suffix`` for many training steps: conv+BN folded, channels-last.

    ``suffix`` itself (which shares its weights with a cached model) is not changed.
    Models torch.fx cannot fold are deep-copied as they are.
    """
    from torch.fx.experimental.optimization import fuse

    suffix.eval()
    try:
        fast = fuse(suffix)  # a folded deep copy (inplace=False)
    except Exception as exc:  # noqa: BLE001 -- any tracing failure: fall back to the plain copy
        log.info("suffix not folded (%s); training through an unfolded copy", exc)
        fast = copy.deepcopy(suffix)
    fast.eval()
    for p in fast.parameters():
        p.requires_grad_(False)
    for t in (*fast.parameters(), *fast.buffers()):  # 4-d weights only: Module.to(channels_last) refuses a 5-d one
        if t.dim() == 4:
            t.data = t.data.contiguous(memory_format=torch.channels_last)
    return fast


def train_adapters_shared_suffix(
    adapters: Sequence[nn.Module],
    suffix: nn.Module | None,
    sender_acts: Sequence[torch.Tensor],
    labels: torch.Tensor,
    *,
    knobs: TrainKnobs,
    device: torch.device,
    check_cancel: Callable[[], None] | None = None,
    on_step: Callable[[int, int], None] | None = None,
    precision: str = "fp32",
    objective: Mapping[str, float] | None = None,
    receiver_acts: torch.Tensor | None = None,
    final_acts: torch.Tensor | None = None,
) -> list[float]:
    """Train ``adapters[k]`` so that ``suffix(adapters[k](sender_acts[k]))`` predicts ``labels`` (task loss).

    sender_acts[k]: [N, *sender_k shape] cached activations (CPU), all aligned with labels: int64 [N].
    Every adapter maps its sender to the receiver's shape [*r], so the stacked suffix input is
    [K * B, *r].  ``objective`` (default {"task": 1.0}) may weigh in ``match``: the mean squared error
    of each adapter's output to ``receiver_acts`` [N, *r] (B's own activation, the copy task), as
    ``train.train_adapter`` computes it; without a task term the suffix is never run (it may be None).  The
    ``final`` term: the mean squared error of the features B's head reads to ``final_acts`` [N, D] (B's own on
    the same images), with a ``final_features.HeadInput`` suffix (it returns logits and those features).
    Returns each adapter's mean training loss over the last epoch.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision is one of {PRECISIONS}, got {precision!r}")
    weights = dict(objective) if objective is not None else {"task": 1.0}
    if not weights or set(weights) - {"task", "match", "final"}:
        raise ValueError(f"the shared-suffix loop trains on task, match and final terms, got {weights}")
    if "match" in weights and (receiver_acts is None or len(receiver_acts) != len(labels)):
        raise ValueError("the match term needs receiver_acts: one receiver activation per label")
    if "final" in weights and (final_acts is None or len(final_acts) != len(labels)):
        raise ValueError("the final term needs final_acts: B's final features for every label")
    if ("task" in weights or "final" in weights) and suffix is None:
        raise ValueError("the task and final terms need the receiver's suffix")
    if len(adapters) != len(sender_acts) or not adapters:
        raise ValueError("one cached activation tensor per adapter, at least one adapter")
    n = len(labels)
    if any(len(h) != n for h in sender_acts):
        raise ValueError("every sender's activations must hold one row per label")
    if suffix is not None:
        suffix.eval()
        for p in suffix.parameters():
            p.requires_grad_(False)
    for adapter in adapters:
        adapter.to(device).train()
    params = [p for adapter in adapters for p in adapter.parameters() if p.requires_grad]
    batch_size, epochs = knobs.batch_size, knobs.epochs
    total = math.ceil(n / batch_size) * epochs
    k = len(adapters)
    if not params or total == 0:
        return [float("nan")] * k
    opt = make_optimizer(params, knobs.optimizer, knobs.lr, knobs.weight_decay)  # element-wise: same as one optimiser per adapter
    sched = cosine_schedule(opt, total)
    gen = torch.Generator().manual_seed(knobs.seed)  # the same batches train_adapter draws
    step = 0
    last = torch.zeros(k)
    bf16 = precision == "bf16"
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        running, seen = torch.zeros(k), 0
        for start in range(0, n, batch_size):
            if check_cancel is not None:
                check_cancel()
            idx = order[start : start + batch_size]
            if len(idx) < 2 and n >= 2:  # BatchNorm needs two samples in train mode
                continue
            b = len(idx)
            per_adapter = torch.zeros(k, device=device)  # [K] each adapter's own mean loss
            with autocast:
                mids = [adapter(h[idx].to(device, torch.float32)) for adapter, h in zip(adapters, sender_acts, strict=True)]
                stacked = torch.cat(mids)  # [K * B, *r]
                if "task" in weights or "final" in weights:
                    if stacked.dim() == 4:
                        stacked = stacked.contiguous(memory_format=torch.channels_last)
                    logits = suffix(stacked)  # [K * B, classes], or with "final" (those, features [K * B, D])
                    logits, feats = logits if "final" in weights else (logits, None)
                    logits = logits.float()
            if "task" in weights:
                y = labels[idx].to(device).repeat(k)  # [K * B]
                task = F.cross_entropy(logits, y, reduction="none").view(k, b).mean(dim=1)  # [K]
                per_adapter = per_adapter + weights["task"] * task
            if "match" in weights:
                target = receiver_acts[idx].to(device, torch.float32).reshape(1, b, -1)  # [1, B, prod(r)]
                copy_error = (stacked.float().reshape(k, b, -1) - target).pow(2).mean(dim=(1, 2))  # [K]
                per_adapter = per_adapter + weights["match"] * copy_error
            if "final" in weights:
                want = final_acts[idx].to(device, torch.float32).reshape(1, b, -1)  # [1, B, D]
                final_error = (feats.float().reshape(k, b, -1) - want).pow(2).mean(dim=(1, 2))  # [K]
                per_adapter = per_adapter + weights["final"] * final_error
            loss = per_adapter.sum()  # d loss / d adapter_k = d (its own mean loss) / d adapter_k
            check_finite(loss, step)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            running += per_adapter.detach().cpu() * b
            seen += b
            if on_step is not None:
                on_step(step, total)
        last = running / max(seen, 1)
    for adapter in adapters:
        adapter.eval()
    return [float(v) for v in last]
