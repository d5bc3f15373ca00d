"""Collect a frozen module's outputs over a dataset split, once.

Training an adapter over cached prefix outputs is exact (frozen parts are in
eval mode and there is no augmentation) and saves running the prefix every
step.  Activations live in memory under a budget, else in a float16 memmap on
disk (half the bytes, enough precision for adapter training).

``collect_cuts`` records many cuts from one forward pass per batch (forward hooks,
each checked against the ``split`` prefix), for matrices and similarity.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterator

import numpy as np
import torch
from torch import nn

from stitchcore.cuts import Cut, split
from stitchcore.data.images import ImageDataset
from stitchcore.models.preprocess import Preprocess
from stitchcore.models.loaded import LoadedModel

__all__ = ["collect", "collect_cuts", "memory_budget_bytes"]

log = logging.getLogger(__name__)

CUT_BATCH = 256  # images per forward pass in collect_cuts


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


# ---------------------------------------------------------------------------- many cuts, one pass


@contextlib.contextmanager
def _recording(modules: dict[str, nn.Module]) -> Iterator[dict[str, torch.Tensor]]:
    """Forward hooks storing each module's first output of a forward; removed on exit."""
    got: dict[str, torch.Tensor] = {}
    handles = []

    def make(name: str):
        def hook(_module, _inputs, output):
            if name not in got and isinstance(output, torch.Tensor):
                got[name] = output

        return hook

    try:
        for name, module in modules.items():
            handles.append(module.register_forward_hook(make(name)))
        yield got
    finally:
        for h in handles:
            h.remove()


@torch.no_grad()
def _hookable(model: nn.Module, cuts: list[Cut], example: torch.Tensor) -> tuple[dict[str, nn.Module], dict]:
    """Split the cuts into those a forward hook records exactly (checked against ``split``) and the rest.

    Returns ({name: module to hook}, {name: prefix module}) for the two kinds.
    """
    modules: dict[str, nn.Module] = {}
    for cut in cuts:
        with contextlib.suppress(AttributeError):
            modules[cut.name] = model.get_submodule(cut.name)
    with _recording(modules) as got:
        model(example)
    hooked, prefixes = {}, {}
    for cut in cuts:
        prefix, _ = split(model, cut, example)
        h = got.get(cut.name)
        if h is not None and h.shape == (len(example), *cut.shape) and torch.equal(h, prefix(example)):
            hooked[cut.name] = modules[cut.name]
        else:
            log.info("cut %s is not a hookable module output; its prefix runs on its own", cut.name)
            prefixes[cut.name] = prefix.eval()
    return hooked, prefixes


@torch.no_grad()
def collect_cuts(
    m: LoadedModel,
    cuts: list[Cut],
    ds: ImageDataset,
    split_name: str,
    *,
    device: torch.device,
    limit: int | None = None,
    check_cancel=None,
) -> dict[str, torch.Tensor]:
    """Activations at every cut from one forward pass per batch: {cut name: float32 [N, *cut.shape]} on the CPU."""
    model = m.model.to(device).eval()
    hooked, prefixes = _hookable(model, cuts, m.example_input().to(device))
    n = len(ds.labels(split_name)) if limit is None else min(limit, len(ds.labels(split_name)))
    out = {c.name: torch.empty((n, *c.shape), dtype=torch.float32) for c in cuts}
    i = 0
    for x, _ in ds.batches(split_name, CUT_BATCH, limit=n):
        if check_cancel is not None:
            check_cancel()
        x = x.to(device)
        x = m.preprocess(x) if m.preprocess is not None else x  # [B, C, H, W] model input
        if hooked:
            with _recording(hooked) as got:
                model(x)
            for name in hooked:
                out[name][i : i + len(x)] = got[name].to("cpu", torch.float32)
        for name, prefix in prefixes.items():
            out[name][i : i + len(x)] = prefix(x).to("cpu", torch.float32)
        i += len(x)
    return out
