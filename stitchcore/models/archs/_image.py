"""What every square-image zoo classifier says about itself (private to :mod:`stitchcore.models.archs`)."""

from __future__ import annotations

__all__ = ["SquareImageClassifier"]


class SquareImageClassifier:
    """Mixin for an architecture whose ``config`` has ``in_chans``, ``image_size`` and ``num_classes``.

    >>> from types import SimpleNamespace as NS
    >>> m = SquareImageClassifier(); m.config = NS(in_chans=1, image_size=8, num_classes=10)
    >>> m.input_shape, m.num_outputs
    ((1, 8, 8), 10)
    """

    input_kind = "image"

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One example without the batch dimension: (C, H, W)."""
        return (self.config.in_chans, self.config.image_size, self.config.image_size)

    @property
    def num_outputs(self) -> int:
        """Number of classes."""
        return self.config.num_classes
