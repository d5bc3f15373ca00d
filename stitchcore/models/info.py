"""What a page shows about a loaded model: shape, classes, preprocessing, parameter count, and where its
weights come from (random init and its seed; a fingerprint of the weights to compare across machines).

>>> from stitchcore.models.archs import create_arch
>>> from stitchcore.models.sources import wrap_arch_model
>>> info = describe_model(wrap_arch_model(create_arch("cnn"), "file:/m.safetensors"))
>>> info["params"] > 0, info["input_shape"], info["num_classes"]
(True, (1, 8, 8), 10)

Uploaded checkpoints are saved by :mod:`stitchcore.store.uploads` and named by
:func:`stitchcore.models.refs.upload_ref`.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch
from torch import nn

from stitchcore.models.loaded import LoadedModel
from stitchcore.models.preprocess import Preprocess

__all__ = ["describe_init", "describe_model", "describe_preprocess", "weights_fingerprint"]

FINGERPRINT_HEX = 12  # hex digits shown: 48 bits, ample to tell two draws apart


def weights_fingerprint(model: nn.Module, digits: int = FINGERPRINT_HEX) -> str:
    """The first ``digits`` hex digits of a sha256 over ``model.state_dict()`` (parameters and buffers).

    Each entry adds its name, dtype, shape and raw bytes, in state-dict order, so equal fingerprints mean
    bit-identical weights (on any machine) and a changed value, name or shape changes it.

    >>> a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    >>> b.load_state_dict(a.state_dict())
    <All keys matched successfully>
    >>> weights_fingerprint(a) == weights_fingerprint(b), len(weights_fingerprint(a))
    (True, 12)
    >>> with torch.no_grad():
    ...     b.bias[0] += 1e-6
    >>> weights_fingerprint(a) == weights_fingerprint(b)
    False
    """
    h = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        t = tensor.detach().to("cpu").contiguous().reshape(-1)
        h.update(f"{name}\0{t.dtype}\0{tuple(tensor.shape)}\0".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:digits]


def describe_init(loaded: LoadedModel) -> str:
    """Where randomly drawn weights come from, in words: ``random init, seed 3``; "" for loaded weights.

    Sources record the seed as ``meta["init_seed"]``; an hf: model whose checkpoint lacks some tensors
    lists them in ``meta["random_tensors"]`` (only those are drawn).
    """
    meta = loaded.meta or {}
    seed = meta.get("init_seed")
    if seed is None:
        return ""
    drawn = list(meta.get("random_tensors") or [])
    if not drawn:
        return f"random init, seed {seed}"
    named = ", ".join(drawn[:3]) + (f", … ({len(drawn)} in all)" if len(drawn) > 3 else "")
    return f"random init of the tensors not in the checkpoint ({named}), seed {seed}"


def describe_preprocess(p: Preprocess | None) -> str:
    """One line a person can read: ``resize to 32×32 · 3 channels · mean 0.485, 0.456, 0.406 · std ...``."""
    if p is None:
        return "none (token ids)"
    parts = [f"resize to {p.size[0]}×{p.size[1]} ({p.interpolation})" if p.size else "native size"]
    if p.size and p.resize:
        parts = [f"shorter side to {p.resize}, centre {p.size[0]}×{p.size[1]} ({p.interpolation})"]
    if p.channels:
        parts.append(f"{p.channels} channel{'s' if p.channels != 1 else ''}")
    parts.append("mean " + ", ".join(f"{v:.4g}" for v in p.mean))
    parts.append("std " + ", ".join(f"{v:.4g}" for v in p.std))
    return " · ".join(parts)


def describe_model(loaded: LoadedModel) -> dict[str, Any]:
    """The facts the Models page shows: ref, parameter count, input, preprocessing, dataset, classes.

    ``accuracy`` is the stored test accuracy when known (trained zoo models), else None; ``defaults``
    says which input defaults a ``file:`` ref took (its dataset, mean/std), else ""; ``init`` says which
    weights are random and their seed (:func:`describe_init`), else "".  The weights' fingerprint is
    :func:`weights_fingerprint` (not here: it reads every weight, so a page caches it per ref).
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
        "init": describe_init(loaded),
    }
