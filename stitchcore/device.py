"""Device choice: CUDA if present, else Apple MPS, else CPU; the user can override."""

from __future__ import annotations

import os

import torch

from stitchcore.errors import StitchError

__all__ = ["pick_device", "describe_device"]


def pick_device(preference: str | None = None) -> torch.device:
    """``auto`` (default, or env ``STITCHLAB_DEVICE``) -> cuda > mps > cpu; else the named device."""
    pref = (preference or os.environ.get("STITCHLAB_DEVICE") or "auto").lower()
    if pref == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if pref.startswith("cuda") and not torch.cuda.is_available():
        raise StitchError(f"device {pref!r} asked for but CUDA is not available; use --device cpu or auto")
    try:
        return torch.device(pref)
    except RuntimeError:
        raise StitchError(f"unknown device {pref!r}; use auto, cpu, cuda, cuda:N or mps") from None


def describe_device(device: torch.device) -> str:
    """Human label: 'CUDA: NVIDIA H100 (80 GB)' or 'CPU (2 threads)'."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return f"CUDA: {props.name} ({props.total_memory / 2**30:.0f} GiB)"
    if device.type == "mps":
        return "Apple MPS"
    return f"CPU ({torch.get_num_threads()} threads)"
