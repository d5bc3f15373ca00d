"""What a page shows about a loaded model: shape, classes, preprocessing, parameter count.

>>> from stitchcore.models.archs import create_arch
>>> from stitchcore.models.sources import wrap_arch_model
>>> info = describe_model(wrap_arch_model(create_arch("cnn"), "file:/m.safetensors"))
>>> info["params"] > 0, info["input_shape"], info["num_classes"]
(True, (1, 8, 8), 10)

Uploaded checkpoints are saved by :mod:`stitchcore.store.uploads` and named by
:func:`stitchcore.models.refs.upload_ref`.
"""

from __future__ import annotations

from typing import Any

from stitchcore.models.preprocess import Preprocess
from stitchcore.models.loaded import LoadedModel

__all__ = ["describe_model", "describe_preprocess"]


def describe_preprocess(p: Preprocess | None) -> str:
    """One line a person can read: ``resize to 32×32 · 3 channels · mean 0.485, 0.456, 0.406 · std ...``."""
    if p is None:
        return "none (token ids)"
    parts = [f"resize to {p.size[0]}×{p.size[1]} ({p.interpolation})" if p.size else "native size"]
    if p.channels:
        parts.append(f"{p.channels} channel{'s' if p.channels != 1 else ''}")
    parts.append("mean " + ", ".join(f"{v:.4g}" for v in p.mean))
    parts.append("std " + ", ".join(f"{v:.4g}" for v in p.std))
    return " · ".join(parts)


def describe_model(loaded: LoadedModel) -> dict[str, Any]:
    """The facts the Models page shows: ref, parameter count, input, preprocessing, dataset, classes.

    ``accuracy`` is the stored test accuracy when known (zoo models), else None; ``defaults``
    says which input defaults a ``file:`` ref took (its dataset, mean/std), else "".
    """
    meta = loaded.meta or {}
    accuracy = meta.get("accuracy")
    return {
        "ref": loaded.ref,
        "arch": meta.get("arch") or type(loaded.model).__name__,
        "params": sum(p.numel() for p in loaded.model.parameters()),
        "input_kind": loaded.input_kind,
        "input_shape": tuple(loaded.input_shape),
        "preprocessing": describe_preprocess(loaded.preprocess),
        "dataset": loaded.dataset,
        "num_classes": loaded.num_classes,
        "class_names": list(meta.get("class_names") or []),
        "accuracy": float(accuracy) if isinstance(accuracy, (int, float)) else None,
        "defaults": str(meta.get("defaults") or ""),
    }
