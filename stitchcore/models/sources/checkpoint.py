"""Checkpoint files: safe reading, strict loading, stitchcore's own safetensors format.

Loading never runs pickled code: ``.pt/.pth/.bin/.ckpt`` go through
``torch.load(weights_only=True)``, ``.safetensors`` through safetensors.  Files written by
:func:`save_checkpoint` carry ``{"arch", "arch_kwargs", "meta"}`` in their safetensors header.
The same reader serves the files a hub downloaded (:func:`read_hub_weights`): a cache file is as
untrusted as any other, whoever wrote it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from stitchcore.errors import CheckpointError

__all__ = [
    "save_checkpoint",
    "read_checkpoint",
    "read_hub_weights",
    "load_into",
    "classifier_rows",
    "head_names",
    "TORCH_EXTS",
    "ARCH_HINT",
]

logger = logging.getLogger(__name__)

TORCH_EXTS = (".pt", ".pth", ".bin", ".ckpt")  # read with torch.load(weights_only=True)
_NESTED_KEYS = ("state_dict", "model", "model_state_dict", "module")  # common wrappers around a state dict
_PREFIXES = ("module.", "_orig_mod.")  # DataParallel / torch.compile key prefixes, stripped when on every key
ARCH_HINT = "?arch=zoo:cnn (or zoo:mlp, zoo:resnet, zoo:gpt, timm:resnet18, torchvision:resnet18)"


def _check_path(path: Path) -> None:
    if not path.exists():
        raise CheckpointError(
            f"no checkpoint file at {path}; check the path (file: refs take an absolute path)"
        )
    if path.is_dir():
        raise CheckpointError(
            f"{path} is a directory, not a checkpoint; for a Hugging Face model directory use hf:{path}"
        )
    if not path.is_file():  # a FIFO or a device (a link to /dev/zero): reading it blocks or never ends
        raise CheckpointError(f"{path} is no regular file (a FIFO, socket or device); give a checkpoint file")
    if path.suffix.lower() not in TORCH_EXTS + (".safetensors",):
        raise CheckpointError(f"{path} has an unknown extension; use a .pt, .pth or .safetensors checkpoint")


def _read_safetensors(path: Path, fix: str | None = None) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Tensors and header of a safetensors file; ``fix`` (when given) replaces the message's own fix."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            header = dict(f.metadata() or {})
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # SafetensorError, OSError: truncated or not safetensors at all
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CheckpointError(
            f"{path} is truncated or not a safetensors file ({reason}); {fix or 're-save or re-download it'}"
        ) from e
    return tensors, header


def _read_torch(path: Path, fix: str | None = None) -> Any:
    """What ``torch.load(weights_only=True)`` reads from ``path``: never a pickled callable run, never a retry
    without weights_only.  ``fix`` (when given) replaces the messages' own fixes."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pickle-protocol chatter from the weights-only unpickler
            return torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as e:  # the weights-only unpickler raises many types for bad input
        text = str(e)
        found = re.search(r"GLOBAL ([\w.]+)|safe_globals\(\[([\w.]+)\]\)", text)
        with open(path, "rb") as fh:
            is_pickle = fh.read(1) == b"\x80"  # a bare pickle (protocol 2+) rather than a torch zip
        if "Weights only load failed" in text and (found or is_pickle):  # pickled Python objects
            named = f" (it names {found.group(1) or found.group(2)})" if found else ""
            raise CheckpointError(
                f"{path} holds pickled Python objects, not only tensors{named}, and is refused for safety; "
                f"{fix or 're-save it with torch.save(model.state_dict(), path) or as .safetensors'}"
            ) from e
        # torch's weights-only errors wrap the real cause ("Unsupported operand 149") in a long preamble
        cause = re.search(r"WeightsUnpickler error:\s*(.+)", text)
        reason = (cause.group(1) if cause else text.splitlines()[0] if text else type(e).__name__)[:120]
        raise CheckpointError(
            f"{path} is truncated or not a PyTorch checkpoint ({reason}); {fix or 're-save or re-download it'}"
        ) from e


def _unwrap(obj: Any, path: Path, fix: str | None = None) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """A state dict out of what torch.load returned, plus any arch info stored beside it."""
    if not isinstance(obj, dict):
        raise CheckpointError(
            f"{path} is not a checkpoint: it holds a {type(obj).__name__}, expected a state dict"
            + (f"; {fix}" if fix else "")
        )
    info: dict[str, Any] = {}
    if isinstance(obj.get("arch"), str):
        info["arch"] = obj["arch"]
        info["arch_kwargs"] = obj.get("arch_kwargs") if isinstance(obj.get("arch_kwargs"), dict) else {}
    for key in _NESTED_KEYS:
        if isinstance(obj.get(key), dict):
            obj = obj[key]
            break
    bad = [k for k, v in obj.items() if not isinstance(v, torch.Tensor)]
    if not obj or bad:
        what = f"key {bad[0]!r} holds a {type(obj[bad[0]]).__name__}" if bad else "it is empty"
        raise CheckpointError(
            f"{path} is not a state dict ({what}); {fix or 'save one with torch.save(model.state_dict(), path)'}"
        )
    return dict(obj), info


def _strip_prefixes(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    for prefix in _PREFIXES:
        if sd and all(k.startswith(prefix) for k in sd):
            sd = {k[len(prefix) :]: v for k, v in sd.items()}
    return sd


def read_checkpoint(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read a checkpoint safely: ``(state_dict, info)``.

    ``info`` has ``arch`` (e.g. ``"zoo:cnn"``) and ``arch_kwargs`` when the file
    records them, and ``meta`` (a dict, maybe empty).  Raises
    :class:`CheckpointError` for a missing, truncated, unsafe or non-checkpoint file.
    """
    path = Path(path).expanduser()
    _check_path(path)
    info: dict[str, Any] = {"meta": {}}
    if path.suffix.lower() == ".safetensors":
        sd, header = _read_safetensors(path)
        if not sd:
            raise CheckpointError(f"{path} holds no tensors; it is not a model checkpoint")
        try:
            if header.get("arch"):
                info["arch"] = header["arch"]
                info["arch_kwargs"] = json.loads(header.get("arch_kwargs") or "{}")
            info["meta"] = json.loads(header.get("meta") or "{}")
        except json.JSONDecodeError as e:
            raise CheckpointError(
                f"{path} has a corrupt stitchcore header ({e}); re-save it with save_checkpoint"
            ) from e
    else:
        sd, extra = _unwrap(_read_torch(path), path)
        info.update(extra)
    if "arch" in info and ":" not in info["arch"]:
        info["arch"] = f"zoo:{info['arch']}"  # stitchcore headers store the bare zoo name
    return _strip_prefixes(sd), info


def read_hub_weights(path: str | os.PathLike, model: str) -> dict[str, torch.Tensor]:
    """The state dict in a file a hub downloaded for ``model`` (its cache file), read as :func:`read_checkpoint`
    reads: ``.safetensors`` through safetensors, anything else through ``torch.load(weights_only=True)``.

    A cache file is as untrusted as an upload (anyone who can write the cache folder chose it): one that holds
    pickled code, is truncated, is no regular file or holds no state dict is refused in one line naming it and
    the fix: delete it so it downloads again, or give the weights with ``@file=``.

    >>> read_hub_weights("/no/such/resnet18-f37072fd.pth", "torchvision:resnet18")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    stitchcore.errors.CheckpointError: /no/such/resnet18-f37072fd.pth is no regular file; delete that file ...
    """
    path = Path(path)
    fix = f"delete that file so they download again, or use {model}@file=/path/to/weights.safetensors"
    if not path.is_file():  # gone meanwhile, or a FIFO / device planted in the cache (reading it would block)
        raise CheckpointError(f"{path} is no regular file; {fix}")
    if path.suffix.lower() == ".safetensors":
        sd, _ = _read_safetensors(path, fix)
    else:
        sd, _ = _unwrap(_read_torch(path, fix), path, fix)
    if not sd:
        raise CheckpointError(f"{path} holds no tensors; {fix}")
    return _strip_prefixes(sd)


def classifier_rows(sd: dict[str, torch.Tensor], heads: Iterable[str]) -> int | None:
    """Output classes recorded in a state dict: the rows of the first ``{head}.weight`` found, else None.

    >>> classifier_rows({"fc.weight": torch.zeros(7, 32), "fc.bias": torch.zeros(7)}, ["head", "fc"])
    7
    """
    for head in heads:
        weight = sd.get(f"{head}.weight")
        if weight is not None and weight.dim() >= 1:
            return int(weight.shape[0])
    return None


def head_names(model: nn.Module) -> tuple[str, ...]:
    """Name of ``model``'s classifier for :func:`classifier_rows`: its last Linear (or conv), else ().

    >>> head_names(nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.Linear(4, 3)))
    ('2',)
    """
    last = [name for name, m in model.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d)) and name]
    return (last[-1],) if last else ()


def _first(keys: list[str], n: int = 3) -> str:
    shown = ", ".join(keys[:n])
    return shown + (f", ... {len(keys) - n} more" if len(keys) > n else "")


def _count(items: list, word: str, plural: str = "s") -> str:
    return f"{len(items)} {word}{plural if len(items) != 1 else ''}"


def load_into(model: nn.Module, sd: dict[str, torch.Tensor], source: str, target: str) -> None:
    """Load ``sd`` into ``model`` strictly, or raise one CheckpointError listing what does not fit.

    Keys missing from ``sd`` are allowed only when tied to a loaded key (GPT's
    ``lm_head.weight`` shares ``wte.weight``).  ``source``/``target`` name the
    file and the architecture in the message.
    """
    own = model.state_dict()
    ptr_of = {k: (v.data_ptr(), v.numel()) for k, v in own.items()}
    loaded_ptrs = {ptr_of[k] for k in own if k in sd and own[k].numel()}
    missing = [k for k in own if k not in sd and not (own[k].numel() and ptr_of[k] in loaded_ptrs)]
    unexpected = [k for k in sd if k not in own]
    shapes = [
        f"{k}: file {list(sd[k].shape)} vs model {list(own[k].shape)}"
        for k in sd
        if k in own and tuple(sd[k].shape) != tuple(own[k].shape)
    ]
    if missing or unexpected or shapes:
        parts = []
        if missing:
            parts.append(f"{_count(missing, 'missing key')} ({_first(missing)})")
        if unexpected:
            parts.append(f"{_count(unexpected, 'unexpected key')} ({_first(unexpected)})")
        if shapes:
            parts.append(f"{_count(shapes, 'shape mismatch', 'es')} ({_first(shapes, 2)})")
        raise CheckpointError(
            f"checkpoint {source} does not fit {target}: {'; '.join(parts)}; "
            "check ?arch= and its options (e.g. ?num_classes=N)"
        )
    model.load_state_dict(sd, strict=False)  # strictness checked above, tied keys allowed


def _shared_free(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop later names of tensors sharing storage (tied weights); safetensors refuses aliases."""
    seen: set[tuple[int, int]] = set()
    out = {}
    for k, v in sd.items():
        key = (v.data_ptr(), v.numel())
        if v.numel() and key in seen:
            continue
        seen.add(key)
        out[k] = v.detach().cpu().contiguous()
    return out


def save_checkpoint(model: nn.Module, path: str | os.PathLike, meta: dict[str, Any] | None = None,
                    arch: tuple[str, dict[str, Any]] | None = None) -> Path:
    """Write ``model``'s weights as safetensors with stitchcore's header, atomically.

    The header records ``arch``/``arch_kwargs`` (from ``create_arch``, else ``arch``: a hub family's
    ``("timm:NAME", {"num_classes": 10, ...})``) and
    ``meta`` (JSON: preprocess dict, dataset, class_names ...), so
    ``load_model("file:" + path)`` rebuilds the model with no ``?arch=``.
    Writes a temp file beside ``path`` then ``os.replace``; returns the path.
    """
    from safetensors.torch import save_file

    path = Path(path)
    if path.suffix != ".safetensors":
        raise CheckpointError(
            f"save_checkpoint writes safetensors; name the file {path.with_suffix('.safetensors')}"
        )
    header = {"format": "pt", "producer": "stitchcore", "meta": json.dumps(meta or {})}
    if getattr(model, "arch_name", None):
        header["arch"] = model.arch_name
        header["arch_kwargs"] = json.dumps(getattr(model, "arch_kwargs", {}))
    elif arch is not None:
        header["arch"], header["arch_kwargs"] = arch[0], json.dumps(arch[1])
    else:
        logger.warning("saving %s without arch info; loading it will need ?arch=", type(model).__name__)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        save_file(_shared_free(model.state_dict()), str(tmp), metadata=header)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
