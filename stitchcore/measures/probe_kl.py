"""Probe KL: how alike two cuts are by what a linear probe reads from each (KLAS-style cut matching).

A multinomial logistic probe is fitted at every cut on pooled activations of some images (maps averaged over
space, tokens over positions), and predicts class probabilities for other images; two cuts are alike when their
probes predict alike: the symmetric KL divergence between their predictions, averaged over those images (0 =
the same predictions).  It needs the labels but no adapter, so it ranks the cut pairs of a matrix before anything
is stitched (``experiments.matrix.recommend``).

>>> g = torch.Generator().manual_seed(0)
>>> y = torch.arange(60) % 3
>>> x = torch.nn.functional.one_hot(y, 3).float() * 4 + torch.randn(60, 3, generator=g)
>>> p = probe_probabilities(x[:40], y[:40], x[40:], 3)
>>> tuple(p.shape), bool((p.argmax(1) == y[40:]).float().mean() > 0.9)
((20, 3), True)
>>> round(symmetric_kl(p, p), 6)
0.0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from stitchcore.measures.transfer import fit_probe
from stitchcore.stitching.activations import iter_cuts

if TYPE_CHECKING:
    from stitchcore.cuts import Cut
    from stitchcore.data.images import ImageDataset
    from stitchcore.models.loaded import LoadedModel

__all__ = ["HOLD_EVERY", "cut_probes", "pooled", "pooled_cuts", "probe_kl_grid", "probe_probabilities",
           "symmetric_kl"]

HOLD_EVERY = 5  # every 5th training image is held out of the probes' fit: the KL is read on those


def pooled(h: torch.Tensor, layout: str) -> torch.Tensor:
    """A cut's activations [N, *shape] as vectors [N, D]: a map averaged over space, tokens over positions."""
    if layout == "map":
        return h.float().mean(dim=(2, 3))  # [N, C, H, W] -> [N, C]
    if layout == "map_nhwc":
        return h.float().mean(dim=(1, 2))  # [N, H, W, C] -> [N, C]
    if layout == "tokens":
        return h.float().mean(dim=1)  # [N, T, D] -> [N, D]
    return h.float().flatten(1)  # [N, D]


def probe_probabilities(train_x: torch.Tensor, train_y: torch.Tensor, held_x: torch.Tensor, n_classes: int, *,
                        l2: float = 1e-3, steps: int = 100) -> torch.Tensor:  # fmt: skip
    """A logistic probe fitted on ``train_x`` [N, D] (standardised by its own mean and spread) and labels
    ``train_y`` [N] (:func:`~stitchcore.measures.transfer.fit_probe`); its class probabilities for ``held_x``
    [M, D] -> [M, K]."""
    probe = fit_probe(train_x, train_y, n_classes, l2=l2, steps=steps)
    return torch.softmax(probe.logits(held_x), dim=1).float()


def symmetric_kl(p: torch.Tensor, q: torch.Tensor, eps: float = 1e-6) -> float:
    """(KL(p || q) + KL(q || p)) / 2 between rows of class probabilities [M, K], averaged over the rows."""
    p, q = p.double().clamp_min(eps), q.double().clamp_min(eps)
    return float(((p - q) * (p.log() - q.log())).sum(1).mean() / 2)


def probe_kl_grid(senders: Sequence[torch.Tensor], receivers: Sequence[torch.Tensor]) -> list[list[float]]:
    """[len(senders)][len(receivers)] symmetric KL between each sender cut's and each receiver cut's probe
    predictions ([M, K] each, on the same M images)."""
    return [[round(symmetric_kl(p, q), 6) for q in receivers] for p in senders]


def pooled_cuts(m: LoadedModel, cuts: Sequence[Cut], ds: ImageDataset, split: str, *, n: int, device: torch.device,
                batch_size: int, check_cancel: Callable[[], None] | None = None) -> dict[str, torch.Tensor]:  # fmt: skip
    """Every cut's pooled activations over the first ``n`` images of ``split``, {cut name: [n, D]} on the CPU, from
    one forward pass per batch (nothing bigger than a batch's activations is held)."""
    out: dict[str, list[torch.Tensor]] = {c.name: [] for c in cuts}
    for batch in iter_cuts(m, list(cuts), ds, split, device=device, batch_size=batch_size, limit=n,
                           check_cancel=check_cancel):  # fmt: skip
        for c in cuts:
            out[c.name].append(pooled(batch[c.name], c.layout).cpu())
        del batch
    return {name: torch.cat(parts) for name, parts in out.items()}


def cut_probes(pooled_acts: dict[str, torch.Tensor], labels: torch.Tensor, n_classes: int,
               hold_every: int = HOLD_EVERY) -> dict[str, torch.Tensor]:  # fmt: skip
    """Each cut's probe predictions on the held-out images (every ``hold_every``-th): {cut name: [M, K]}; the probe
    is fitted on the rest of the images ``pooled_acts`` [N, D] hold (``labels`` [N])."""
    held = torch.arange(len(labels)) % hold_every == 0
    return {name: probe_probabilities(x[~held], labels[~held], x[held], n_classes) for name, x in pooled_acts.items()}
