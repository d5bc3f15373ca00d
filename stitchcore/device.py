"""Device choice: CUDA if present, else Apple MPS, else CPU; the user can override."""

from __future__ import annotations

import os
import shutil
import subprocess

import torch

from stitchcore.errors import StitchError

__all__ = ["CHANNELS_LAST_ENV", "describe_device", "module_device", "pick_device", "use_channels_last"]

CHANNELS_LAST_ENV = "STITCHLAB_CHANNELS_LAST"  # auto (CUDA only, the default) | 1 (always) | 0 (never)
_KINDS = "auto, cpu, cuda, cuda:N or mps"  # what --device and STITCHLAB_DEVICE take


def _mps_available() -> bool:
    return getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()


def pick_device(preference: str | None = None) -> torch.device:
    """``auto`` (default, or env ``STITCHLAB_DEVICE``) -> cuda > mps > cpu; else the named device.

    A device this machine lacks is refused in one line naming the fix:

    >>> pick_device("cpu")
    device(type='cpu')
    >>> pick_device("tpu")
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: unknown device 'tpu'; use auto, cpu, cuda, cuda:N or mps
    """
    pref = (preference or os.environ.get("STITCHLAB_DEVICE") or "auto").strip().lower()
    if pref == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(pref)
    except RuntimeError:
        raise StitchError(f"unknown device {pref!r}; use {_KINDS}") from None
    if device.type not in ("cpu", "cuda", "mps"):
        raise StitchError(f"unknown device {pref!r}; use {_KINDS}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            why = f"device {pref!r} asked for but CUDA is not available"
            raise StitchError(f"{why}; use --device cpu or auto")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise StitchError(f"device {pref!r} asked for but this machine has {count} CUDA device(s);"
                              f" use cuda:0 .. cuda:{count - 1}, or auto")  # fmt: skip
    if device.type == "mps" and not _mps_available():
        raise StitchError(f"device {pref!r} asked for but Apple MPS is not available here;"
                          " use --device cpu or auto")  # fmt: skip
    return device


def describe_device(device: torch.device, threads: int | None = None) -> str:
    """Human label: 'CUDA: NVIDIA H100 (80 GB)' or 'CPU (2 threads)'; ``threads``: the CPU threads a job uses
    (default: this process's torch setting).

    >>> describe_device(torch.device("cpu"), threads=1)
    'CPU (1 thread per job)'
    """
    if device.type == "cuda":
        seen = _nvidia_smi(device.index or 0)
        if seen is not None:
            name, used_mib, total_mib = seen
            return f"CUDA: {name} ({used_mib / 1024:.1f} of {total_mib / 1024:.0f} GiB in use)"
        props = torch.cuda.get_device_properties(device)  # no nvidia-smi: this starts CUDA in this process
        return f"CUDA: {props.name} ({props.total_memory / 2**30:.0f} GiB)"
    if device.type == "mps":
        return "Apple MPS"
    if threads is not None:
        return f"CPU ({threads} thread{'s' if threads != 1 else ''} per job)"
    return f"CPU ({torch.get_num_threads()} threads)"


def module_device(module: torch.nn.Module) -> torch.device:
    """Where ``module``'s first parameter lives; the CPU for a module without parameters.

    >>> module_device(torch.nn.Linear(2, 2))
    device(type='cpu')
    """
    p = next(iter(module.parameters()), None)
    return p.device if p is not None else torch.device("cpu")


def _nvidia_smi(index: int) -> tuple[str, float, float] | None:
    """(name, MiB in use, MiB in all) of GPU ``index`` as nvidia-smi reports it, or None where it cannot say.

    Asked of nvidia-smi rather than torch so that the process showing it (the app's server) never starts a
    CUDA context of its own: only job workers use the GPU.
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, f"--id={index}", "--query-gpu=name,memory.used,memory.total",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
        name, used, total = (part.strip() for part in out.stdout.strip().splitlines()[0].rsplit(",", 2))
        return name, float(used), float(total)
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def use_channels_last(model: torch.nn.Module, device: torch.device | str) -> bool:
    """Whether ``model`` keeps its 4-D weights (and so its activations) in NHWC order on ``device``, the layout
    tensor cores read fastest: ``$STITCHLAB_CHANNELS_LAST`` (auto: a model with 2-D convolutions on CUDA).

    >>> use_channels_last(torch.nn.Conv2d(3, 8, 3), "cpu")
    False
    """
    policy = os.environ.get(CHANNELS_LAST_ENV, "auto").strip().lower()
    if policy in ("0", "false", "no"):
        return False
    has_conv = any(isinstance(m, torch.nn.Conv2d) for m in model.modules())
    if policy in ("1", "true", "yes"):
        return has_conv
    return has_conv and torch.device(device).type == "cuda"
