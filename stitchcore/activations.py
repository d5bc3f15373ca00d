"""Collect a frozen module's outputs over a dataset split, once.

Training an adapter over cached prefix outputs is exact (frozen parts are in
eval mode and there is no augmentation) and saves running the prefix every
step.  Activations live in memory under a budget, else in a float16 memmap on
disk (half the bytes, enough precision for adapter training).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from stitchcore.data import ImageDataset
from stitchcore.preprocess import Preprocess

__all__ = ["collect", "memory_budget_bytes"]

log = logging.getLogger(__name__)


def memory_budget_bytes() -> int:
    """In-memory activation budget: env ``STITCHLAB_ACT_BUDGET_MB`` (default 2048 MB)."""
    return int(float(os.environ.get("STITCHLAB_ACT_BUDGET_MB", "2048")) * 2**20)


@torch.no_grad()
def collect(
    module: nn.Module | Callable[[torch.Tensor], torch.Tensor],
    ds: ImageDataset,
    preprocess: Preprocess | None,
    split: str,
    *,
    device: torch.device,
    batch_size: int = 256,
    limit: int | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> torch.Tensor:
    """Run ``module(preprocess(x))`` over ``split``; returns [N, *activation shape] on the CPU.

    float32 in memory when it fits :func:`memory_budget_bytes`, else a float16
    tensor backed by a memmap file in the temp directory.
    """
    n = len(ds.labels(split)) if limit is None else min(limit, len(ds.labels(split)))
    out: torch.Tensor | None = None
    i = 0
    for x, _ in ds.batches(split, batch_size, limit=n):
        if check_cancel is not None:
            check_cancel()
        x = x.to(device)
        h = module(preprocess(x) if preprocess is not None else x)
        if out is None:
            out = _allocate((n, *h.shape[1:]))
        out[i : i + len(h)] = h.to("cpu", out.dtype)
        i += len(h)
    if out is None:
        raise ValueError(f"split {split!r} of {ds.name} is empty")
    return out


def _allocate(shape: tuple[int, ...]) -> torch.Tensor:
    nbytes = int(np.prod(shape)) * 4
    if nbytes <= memory_budget_bytes():
        return torch.empty(shape, dtype=torch.float32)
    fd, path = tempfile.mkstemp(prefix="stitchlab-acts-", suffix=".f16")
    os.close(fd)
    log.info("activations %s (%.1f GB) spill to %s as float16", shape, nbytes / 1e9, path)
    mm = np.memmap(path, dtype=np.float16, mode="w+", shape=shape)
    os.unlink(path)  # the mapping keeps the file alive; nothing is left behind
    return torch.from_numpy(mm)
