"""Closed-form fits and scores of many adapters from streamed batches, for activations too big to cache.

The cached path (:func:`~stitchcore.stitching.activations.collect_cuts`, then fit and score on the
cached tensors) keeps every cut's activations of the whole split in memory.  When they exceed the
memory budget, the same numbers come from streaming: per batch of images, one forward pass of A
(every sender cut) and one of B (every receiver cut) feed every adapter's
:class:`~stitchcore.stitching.shared_fits.SharedFits`; then per test batch one pass of A feeds every
adapter and its receiver's suffix.  Only one batch of activations lives at a time, and a cell whose
resampled inputs are large (a late, wide sender into an early, fine grid) takes each batch in slices.

>>> images_per_batch(bytes_per_image=4 * 2**20, budget=96 * 2**20)  # 4 MB of cuts an image, 96 MB budget
8
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from stitchcore.cuts import Cut
from stitchcore.data.images import ImageDataset
from stitchcore.device import module_device
from stitchcore.models.loaded import LoadedModel
from stitchcore.stitching.activations import CUT_BATCH, iter_cuts
from stitchcore.stitching.adapters import Adapter
from stitchcore.stitching.evaluate import ClassifierScore, score_logits
from stitchcore.stitching.shared_fits import shared_fits

__all__ = ["StreamedCell", "fit_streamed", "images_per_batch", "images_per_slice", "score_streamed"]

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class StreamedCell:
    """One adapter joining A's ``sender`` cut to B's ``receiver`` cut."""

    adapter: Adapter
    sender: Cut
    receiver: Cut


def images_per_batch(bytes_per_image: int, budget: int) -> int:
    """Images in one streamed batch: its activations at every cut within a third of ``budget`` (1 .. CUT_BATCH)."""
    return max(1, min(CUT_BATCH, budget // 3 // max(1, bytes_per_image)))


@torch.no_grad()
def images_per_slice(adapter: Adapter, sender: Cut, receiver: Cut, budget: int, work: int = 0) -> int:
    """Images one adapter fits or scores at once: its resampled input and target with their float32 and
    float64 copies, plus ``work`` bytes an image (the suffix's forward), within an eighth of ``budget``.

    A late, wide sender into an early, fine grid (2048 channels resampled to 56 x 56) takes one image
    at a time; a small net's cells take hundreds.
    """
    prepared = adapter.prepare(torch.zeros(1, *sender.shape, device=module_device(adapter))).numel()
    per_image = (prepared + math.prod(receiver.shape)) * 4 * 5 + work
    return max(1, budget // 8 // per_image)


def _unique(cuts: Sequence[Cut]) -> list[Cut]:
    return list({c.name: c for c in cuts}.values())


def _bytes(cuts: Sequence[Cut]) -> int:
    return 4 * sum(math.prod(c.shape) for c in cuts)


def fit_streamed(
    cells: Sequence[StreamedCell],
    a: LoadedModel,
    b: LoadedModel,
    ds: ImageDataset,
    n_train: int,
    *,
    method: str,
    device: torch.device,
    budget: int,
    work: int = 0,
    check_cancel: Callable[[], None] | None = None,
    progress: Progress | None = None,
    hold_every: int = 0,
    keep_proxy: bool = False,
) -> list[dict[str, float | None]]:
    """Fit every cell's adapter in closed form from one streamed pass of A and B over ``n_train``
    training images, from shared moments (:class:`~stitchcore.stitching.shared_fits.SharedFits`); returns
    per cell its fit's normalised ``residual`` (as :func:`~stitchcore.stitching.fits.fit_adapter`) and, with
    ``hold_every``, the proxy's held-out ``r2`` and ``cka`` where the budget holds their sums (or always,
    ``keep_proxy``: :func:`~stitchcore.stitching.shared_fits.shared_fits`).

    A batch holds every sender and receiver cut's activations and ``work`` bytes an image (one forward
    pass's working memory: :func:`~stitchcore.stitching.activations.forward_bytes_per_image`) within a
    third of ``budget``.
    """
    if not cells:
        return []
    fits = shared_fits([c.adapter for c in cells], method, budget=budget, hold_every=hold_every, keep_proxy=keep_proxy)
    senders, receivers = _unique([c.sender for c in cells]), _unique([c.receiver for c in cells])
    batch = images_per_batch(_bytes(senders) + _bytes(receivers) + work, budget)
    n_batches = math.ceil(n_train / batch)
    kw = {"device": device, "batch_size": batch, "limit": n_train, "check_cancel": check_cancel}
    stream_a, stream_b = iter_cuts(a, senders, ds, "train", **kw), iter_cuts(b, receivers, ds, "train", **kw)
    for i in range(n_batches):  # next() by hand: zip and enumerate would hold the last batch while making the next
        acts_a, acts_b = next(stream_a), next(stream_b)
        fits.update(acts_a, acts_b, first=i * batch)  # each group's slices of images stay within the budget
        del acts_a, acts_b  # before the next batch is computed
        if progress is not None:
            progress((i + 1) / n_batches, f"fitting {len(cells)} adapters: batch {i + 1}/{n_batches}")
    return fits.records()


@torch.no_grad()
def score_streamed(
    cells: Sequence[StreamedCell],
    suffixes: Sequence[nn.Module],
    a: LoadedModel,
    ds: ImageDataset,
    n_test: int,
    *,
    device: torch.device,
    budget: int,
    work: int = 0,
    check_cancel: Callable[[], None] | None = None,
    progress: Progress | None = None,
) -> list[ClassifierScore]:
    """Test accuracy of ``suffixes[k](cells[k].adapter(h))`` for every cell, h streamed from one pass of A
    over ``n_test`` test images (each suffix: B's frozen eval-mode top from that cell's receiver); ``work``
    as in :func:`fit_streamed`, for A's pass and for each suffix's."""
    if not cells:
        return []
    senders = _unique([c.sender for c in cells])
    batch = images_per_batch(_bytes(senders) + work, budget)
    slices = [images_per_slice(c.adapter, c.sender, c.receiver, budget, work) for c in cells]
    for cell in cells:
        cell.adapter.eval()
    logits: list[list[torch.Tensor]] = [[] for _ in cells]
    n_batches = math.ceil(n_test / batch)
    stream = iter_cuts(a, senders, ds, "test", device=device, batch_size=batch, limit=n_test,
                       check_cancel=check_cancel)  # fmt: skip
    for i in range(n_batches):  # next() by hand: enumerate would hold the last batch while making the next
        acts = next(stream)
        for out, cell, suffix, size in zip(logits, cells, suffixes, slices):
            h = acts[cell.sender.name]  # [B, *sender]
            for j in range(0, len(h), size):
                out.append(suffix(cell.adapter(h[j : j + size].float())).float().cpu())  # [slice, K]
        del acts, h  # before the next batch is computed
        if progress is not None:
            progress((i + 1) / n_batches, f"scoring {len(cells)} adapters: batch {i + 1}/{n_batches}")
    labels = ds.labels("test")[:n_test]
    return [score_logits(torch.cat(out), labels, ds.num_classes) for out in logits]
