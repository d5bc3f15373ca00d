"""Collect a frozen module's outputs over a dataset split, once.

Training an adapter over cached prefix outputs is exact (frozen parts are in
eval mode and there is no augmentation) and saves running the prefix every
step.  Activations live in memory under a budget, else in a float16 memmap on
disk (half the bytes, enough precision for adapter training).

``collect_cuts`` records many cuts from one forward pass per batch (forward hooks
through :func:`stitchcore.cuts.record.record`, each checked against the ``split``
prefix), for matrices and similarity:

>>> from torch import nn
>>> from stitchcore.cuts import list_cuts
>>> from stitchcore.data.images import ImageDataset
>>> from stitchcore.models.loaded import LoadedModel
>>> g = torch.Generator().manual_seed(0)
>>> images = lambda n: torch.randint(0, 256, (n, 1, 8, 8), dtype=torch.uint8, generator=g)  # [N, 1, 8, 8]
>>> labels = lambda n: torch.arange(n) % 2  # [N]
>>> ds = ImageDataset("toy", ("a", "b"), images(6), labels(6), images(4), labels(4))
>>> net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(256, 2)).eval()
>>> m = LoadedModel("toy", net, "image", (1, 8, 8), None, 2)
>>> cuts = list_cuts(m)
>>> acts = collect_cuts(m, cuts, ds, "test", device=torch.device("cpu"))
>>> {name: tuple(a.shape) for name, a in acts.items()}  # [N, *cut.shape] float32 each
{'0': (4, 4, 8, 8), '1': (4, 4, 8, 8), '2': (4, 256)}
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
from stitchcore.cuts.record import record
from stitchcore.data.images import ImageDataset
from stitchcore.models.preprocess import Preprocess
from stitchcore.models.loaded import LoadedModel

__all__ = ["CutsOnDemand", "OnDemand", "collect", "collect_cuts", "forward_bytes_per_image", "iter_cuts", "memory_budget_bytes"]

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
    for x, _ in ds.model_batches(split, batch_size, preprocess, device, limit=n):
        if check_cancel is not None:
            check_cancel()
        h = module(x)
        if out is None:
            out = _allocate((n, *h.shape[1:]))
        out[i : i + len(h)] = h.to("cpu", out.dtype)
        i += len(h)
    if out is None:
        raise ValueError(f"split {split!r} of {ds.name} is empty")
    return out


class OnDemand:
    """A module's activations computed when a batch asks for them, for data whose cache would not fit.

    Indexed like the cached tensor :func:`collect` returns (``acts[idx]``: [len(idx), *shape], a slice or
    int64 indices), so the adapter loops take either; each access runs ``module`` (a frozen prefix) under
    ``no_grad`` on ``device`` over those images, and nothing is kept.
    """

    def __init__(self, module: nn.Module | Callable[[torch.Tensor], torch.Tensor], ds: ImageDataset,
                 preprocess: Preprocess | None, split: str, n: int, device: torch.device) -> None:  # fmt: skip
        self.module, self.ds, self.preprocess, self.split, self.n, self.device = module, ds, preprocess, split, n, device

    def __len__(self) -> int:
        return self.n

    @torch.no_grad()
    def __getitem__(self, index: slice | torch.Tensor) -> torch.Tensor:
        if isinstance(index, slice):
            index = slice(*index.indices(self.n))
        return self.module(self.ds.model_inputs(self.split, index, self.preprocess, self.device))


class CutsOnDemand:
    """Several cuts of one model computed together when a batch asks for them: ``acts[name][idx]`` is
    [len(idx), *cut.shape] on ``device``.

    One forward pass per drawn batch serves every cut: the adapters trained side by side (one per sender)
    ask for the same ``idx`` in a step, and the last pass is kept for exactly that index object.
    """

    def __init__(self, m: LoadedModel, cuts: list[Cut], ds: ImageDataset, split: str, n: int,
                 device: torch.device) -> None:  # fmt: skip
        self.m, self.ds, self.split, self.n, self.device = m, ds, split, n, device
        self.model = m.model.to(device).eval()
        self.hooked, self.prefixes = _hookable(self.model, cuts, m.example_input())
        self._last: tuple[object, dict[str, torch.Tensor]] = (None, {})

    def _pass(self, index: slice | torch.Tensor) -> dict[str, torch.Tensor]:
        if self._last[0] is not index:
            x = self.ds.model_inputs(self.split, index, self.m.preprocess, self.device)
            self._last = (None, {})  # the last batch goes before the next is made
            self._last = (index, _cut_batch(self.model, self.hooked, self.prefixes, x))
        return self._last[1]

    def __getitem__(self, name: str) -> _CutView:
        return _CutView(self, name)


class _CutView:
    """One cut of a :class:`CutsOnDemand`, indexed like a cached [N, *cut.shape] tensor."""

    def __init__(self, source: CutsOnDemand, name: str) -> None:
        self.source, self.name = source, name

    def __len__(self) -> int:
        return self.source.n

    def __getitem__(self, index: slice | torch.Tensor) -> torch.Tensor:
        return self.source._pass(index)[self.name]


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


@torch.no_grad()
def _hookable(
    model: nn.Module, cuts: list[Cut], example: torch.Tensor
) -> tuple[list[str], dict[str, nn.Module]]:
    """Split the cuts into those a forward hook records exactly (checked against ``split``) and the rest.

    Returns ([names to record], {name: prefix module}) for the two kinds; ``example`` is [B, ...].
    """
    names: list[str] = []  # cuts that are module paths (not the k-th call "name:k" of a shared module)
    for cut in cuts:
        with contextlib.suppress(AttributeError):
            if cut.name and model.get_submodule(cut.name) is not None:
                names.append(cut.name)
    with record(model, names) as got:
        model(example)
    hooked, prefixes = [], {}
    for cut in cuts:
        prefix, _ = split(model, cut, example)
        h = got.get(cut.name)  # [B, *cut.shape] where the hook saw it
        if h is not None and h.shape == (len(example), *cut.shape) and torch.equal(h, prefix(example)):
            hooked.append(cut.name)
        else:
            log.info("cut %s is not a hookable module output; its prefix runs on its own", cut.name)
            prefixes[cut.name] = prefix.eval()
    return hooked, prefixes


@torch.no_grad()
def forward_bytes_per_image(m: LoadedModel) -> int:
    """Rough working memory of one image's forward pass of ``m``: four float32 copies of the largest
    output of any leaf module (what is alive at once inside a block), per image.

    Measured on a random-init ResNet-50 at 224 x 224: ~11 MB an image beyond the weights; this gives 12.8 MB.
    """
    biggest = 0

    def hook(_module: nn.Module, _inputs: object, out: object) -> None:
        nonlocal biggest
        if isinstance(out, torch.Tensor) and out.dim() >= 1 and len(out):
            biggest = max(biggest, out.numel() // len(out))

    leaves = [mod for mod in m.model.modules() if not any(True for _ in mod.children())]
    flags = {mod: mod.training for mod in m.model.modules()}  # eval for the pass: no BatchNorm stat updates
    m.model.eval()
    handles = [mod.register_forward_hook(hook) for mod in leaves]
    try:
        m.model(m.example_input())  # [2, ...] model input, on the model's device
    finally:
        for h in handles:
            h.remove()
        for mod, training in flags.items():
            mod.training = training
    return 4 * 4 * biggest


def iter_cuts(
    m: LoadedModel,
    cuts: list[Cut],
    ds: ImageDataset,
    split_name: str,
    *,
    device: torch.device,
    batch_size: int = CUT_BATCH,
    limit: int | None = None,
    check_cancel=None,
) -> Iterator[dict[str, torch.Tensor]]:
    """Every cut's activations batch by batch, one forward pass per batch: {cut name: [B, *cut.shape]} on ``device``.

    Nothing outlives its batch: for data whose activations do not fit in memory at once.  The
    consumer should drop each batch (``del``) before asking for the next, so that two batches'
    activations never live at once.
    """
    model = m.model.to(device).eval()
    hooked, prefixes = _hookable(model, cuts, m.example_input().to(device))
    n = len(ds.labels(split_name)) if limit is None else min(limit, len(ds.labels(split_name)))
    for x, _ in ds.model_batches(split_name, batch_size, m.preprocess, device, limit=n):
        if check_cancel is not None:
            check_cancel()
        yield _cut_batch(model, hooked, prefixes, x)  # no local keeps it while the next is made


@torch.no_grad()
def _cut_batch(
    model: nn.Module, hooked: list[str], prefixes: dict[str, nn.Module], x: torch.Tensor
) -> dict[str, torch.Tensor]:
    """One batch of model input [B, ...] -> {cut name: [B, *cut.shape]} from one forward pass (and the
    prefixes)."""
    acts: dict[str, torch.Tensor] = {}
    if hooked:
        with record(model, hooked) as got:  # {name: [B, *cut.shape]}
            model(x)
        acts.update((name, got[name]) for name in hooked)
    for name, prefix in prefixes.items():
        acts[name] = prefix(x)
    return acts


def collect_cuts(
    m: LoadedModel,
    cuts: list[Cut],
    ds: ImageDataset,
    split_name: str,
    *,
    device: torch.device,
    limit: int | None = None,
    check_cancel=None,
    batch_size: int = CUT_BATCH,
) -> dict[str, torch.Tensor]:
    """Activations at every cut from one forward pass per batch: {cut name: float32 [N, *cut.shape]} on the CPU."""
    n = len(ds.labels(split_name)) if limit is None else min(limit, len(ds.labels(split_name)))
    out = {c.name: torch.empty((n, *c.shape), dtype=torch.float32) for c in cuts}
    i = 0
    for acts in iter_cuts(m, cuts, ds, split_name, device=device, batch_size=batch_size, limit=n,
                          check_cancel=check_cancel):  # fmt: skip
        i += _copy_batch(out, acts, i)
        del acts  # before the next batch is computed
    return out


def _copy_batch(out: dict[str, torch.Tensor], acts: dict[str, torch.Tensor], i: int) -> int:
    """Write one batch {name: [B, ...]} into ``out`` {name: [N, ...]} at row ``i``; B (0 for no cuts)."""
    n = 0
    for name, h in acts.items():
        out[name][i : i + len(h)] = h.to("cpu", torch.float32)
        n = len(h)
    return n
