"""A noise sender: structured random activations of a sender cut's shape, clustered by class.

The control of "Functional Alignment Can Mislead" (ICML 2025): a stitch can reach high accuracy from a
sender that holds nothing but noise, if that noise is clustered by class, because the adapter only has to map
clusters onto the receiver's classes.  So a stitch into B is evidence about A's representation only where it
beats this sender.  Each class ``k`` gets a random centre ``c_k`` of the cut's shape; an example of class ``y``
is ``c_y + spread * e`` (``e`` fresh standard normal noise), rescaled to the real sender's overall mean and
standard deviation, so an adapter sees activations of the same shape and scale as A's, and nothing of the image
but its label.

Centres depend on ``seed`` only (train and test share them); the per-example noise on ``seed`` and the split's
name, so the test examples are new draws from the same clusters.

>>> labels = torch.tensor([0, 1, 0, 2])
>>> noise = clustered_noise(labels, (4, 2, 2), n_classes=3, seed=0, split="train")
>>> tuple(noise.shape), noise.dtype  # [N, *shape]
((4, 4, 2, 2), torch.float32)
>>> torch.equal(noise, clustered_noise(labels, (4, 2, 2), n_classes=3, seed=0, split="train"))  # seeded
True
>>> like = torch.randn(10, 4, 2, 2) * 3 + 5  # a real sender's activations
>>> scaled = clustered_noise(labels, (4, 2, 2), n_classes=3, seed=0, split="train", like=like)
>>> round(float(scaled.mean()), 3) == round(float(like.mean()), 3), round(float(scaled.std()), 3) == round(float(like.std()), 3)
(True, True)
"""

from __future__ import annotations

import zlib

import torch

__all__ = ["NOISE_SPREAD", "clustered_noise"]

NOISE_SPREAD = 1.0  # within-class noise per unit, relative to the centres' (unit) spread between classes


def clustered_noise(
    labels: torch.Tensor, shape: tuple[int, ...], *, n_classes: int, seed: int, split: str,
    spread: float = NOISE_SPREAD, like: torch.Tensor | None = None,
) -> torch.Tensor:  # fmt: skip
    """float32 [N, *shape]: class-clustered noise for ``labels`` (int64 [N] in 0..n_classes-1).

    ``like`` (the real sender's activations, any leading size): the noise is rescaled to its overall mean
    and standard deviation; without it the noise is standardised (mean 0, std 1 over all values).
    """
    if labels.ndim != 1:
        raise ValueError(f"labels must be one-dimensional [N], got shape {tuple(labels.shape)}")
    if n_classes < 1 or (len(labels) and (int(labels.min()) < 0 or int(labels.max()) >= n_classes)):
        raise ValueError(f"labels must lie in 0..{n_classes - 1}")
    centres_gen = torch.Generator().manual_seed(seed)
    centres = torch.randn((n_classes, *shape), generator=centres_gen)  # [K, *shape]
    split_gen = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(split.encode()))
    noise = centres[labels.long()] + spread * torch.randn((len(labels), *shape), generator=split_gen)
    noise = (noise - noise.mean()) / noise.std().clamp_min(1e-12) if noise.numel() > 1 else noise - noise.mean()
    if like is not None and like.numel() > 1:
        noise = noise * like.float().std() + like.float().mean()
    return noise.float()
