"""What a page shows about a loaded model, and where uploaded checkpoints go.

>>> from stitchcore.models.archs import create_arch
>>> from stitchcore.models.sources import wrap_arch_model
>>> info = describe_model(wrap_arch_model(create_arch("cnn"), "file:/m.safetensors"))
>>> info["params"] > 0, info["input_shape"], info["num_classes"]
(True, (1, 8, 8), 10)
>>> upload_ref("/s/uploads/ab-m.pt", "zoo:cnn", '{"channels": [8, 16], "num_classes": 3}')
'file:/s/uploads/ab-m.pt?arch=zoo:cnn&channels=8,16&num_classes=3'

An upload is content-addressed: ``<store root>/uploads/<sha256[:16]>-<safe name>``,
written atomically, so the same bytes always give the same ``file:`` ref.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from stitchcore.errors import CheckpointError, RefError
from stitchcore.models.preprocess import Preprocess
from stitchcore.models.refs import ModelRef
from stitchcore.models.loaded import LoadedModel

__all__ = ["UPLOAD_DIR", "UPLOAD_EXTS", "describe_model", "describe_preprocess", "save_upload", "upload_ref"]

UPLOAD_EXTS = (".pt", ".pth", ".safetensors")  # what the upload accepts; all read without running pickles
UPLOAD_DIR = "uploads"  # under the store root, beside blobs/
_NAME_LIMIT = 80  # characters kept of the uploaded file's name (the hash keeps names unique)


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

    ``accuracy`` is the stored test accuracy when known (zoo models), else None.
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
    }


def _safe_name(filename: str) -> str:
    base = Path(filename.replace("\\", "/")).name  # no directories from the client
    stem, ext = os.path.splitext(base)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._") or "checkpoint"
    return stem[:_NAME_LIMIT] + ext.lower()


def save_upload(store: Any, filename: str, data: bytes) -> Path:
    """Write uploaded checkpoint bytes under ``<store root>/uploads/`` atomically; returns the path.

    The name is ``<sha256[:16]>-<safe name>``: the same bytes land on the same
    path (written once).  Raises :class:`CheckpointError` for an extension other
    than .pt/.pth/.safetensors or an empty file.  Nothing is loaded here.
    """
    ext = os.path.splitext(filename)[1].lower()
    if ext not in UPLOAD_EXTS:
        raise CheckpointError(
            f"{filename!r} is not a checkpoint file; upload a {', '.join(UPLOAD_EXTS)} file "
            "(e.g. saved with torch.save(model.state_dict(), 'model.pt'))"
        )
    if not data:
        raise CheckpointError(f"{filename!r} is empty; upload the checkpoint again")
    folder = Path(store.root) / UPLOAD_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(data).hexdigest()[:16]}-{_safe_name(filename)}"
    if path.exists() and path.stat().st_size == len(data):
        return path
    tmp = folder / f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _option_text(key: str, value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float, str)):
        return str(value)
    raise RefError(
        f"architecture option {key!r} must be a number, string or list, not {type(value).__name__}"
    )


def upload_ref(path: str | os.PathLike, arch: str = "", options: str | dict[str, Any] | None = None) -> str:
    """The ``file:`` ref of a saved upload: ``file:PATH?arch=ARCH&k=v...`` (canonical spelling).

    ``arch`` is ``zoo:cnn``, ``timm:resnet18`` ... or blank for a stitchcore
    safetensors file that records its architecture; ``options`` is a JSON object
    (text or dict) of architecture options, lists written as ``8,16``.
    """
    if isinstance(options, str):
        text = options.strip()
        try:
            options = json.loads(text) if text else {}
        except json.JSONDecodeError as e:
            raise RefError(
                f'architecture options are not valid JSON ({e.msg}); write an object like {{"num_classes": 10}}'
            ) from None
    options = options or {}
    if not isinstance(options, dict):
        raise RefError('architecture options must be a JSON object like {"num_classes": 10}')
    arch = arch.strip()
    if options and not arch:
        raise RefError("architecture options need an architecture; fill in e.g. zoo:cnn or timm:resnet18")
    params = [("arch", arch)] if arch else []
    params += [(str(k), _option_text(str(k), v)) for k, v in options.items()]
    return str(ModelRef(scheme="file", name=str(path), params=tuple(params)))
