"""Helpers shared by the hub sources (timm, torchvision, hf): query booleans, seeds, a fast offline probe, and the
reading of a model folder's JSON config (bounded: its size, its nesting, its numbers)."""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any

from stitchcore.errors import RefError, SourceError
from stitchcore.models.refs import ModelRef

__all__ = ["MAX_CONFIG_BYTES", "MAX_JSON_BYTES", "check_folder_files", "host_reachable", "offline_flag", "parse_bool",
           "read_json_config", "refuse_seed"]  # fmt: skip

logger = logging.getLogger(__name__)

MAX_CONFIG_BYTES = 16 << 20  # a model folder's config.json: real ones stay under ~2 MB (a 21k-class label map)
MAX_JSON_BYTES = 128 << 20  # the folder's other JSON files (a 256k-token tokenizer.json is ~35 MB)
_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def parse_bool(ref: ModelRef, key: str, default: bool) -> bool:
    """Boolean query option ``key`` of ``ref`` (true/false/1/0/yes/no)."""
    value = ref.param(key)
    if value is None:
        return default
    low = value.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", "none"):
        return False
    raise RefError(f"option {key}={value!r} in '{ref}' must be true or false, e.g. ?{key}=false")


def refuse_seed(ref: ModelRef, why: str) -> None:
    """RefError when ``ref`` gives a ``seed=`` (other than the default 0) for weights that are not random.

    ``why`` says where the weights come from instead and what to write for random ones.
    """
    if ref.param("seed") is not None:
        raise RefError(f"seed= in '{ref}' is for random weights, but {why}; or leave seed= out")


_REACH_TTL_S = 60.0  # how long a reachability answer is reused
_REACH_TIMEOUT_S = 2.0  # connect timeout of the probe: fail fast when offline
_reach_cache: dict[str, tuple[float, bool]] = {}
_reach_lock = threading.Lock()


def offline_flag() -> bool:
    """Whether the hubs are switched off here (STITCHLAB_OFFLINE, HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE)."""
    for var in ("STITCHLAB_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return True
    try:  # huggingface_hub reads its env once at import; honour a later patch of its constant too
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except ImportError:
        return False


def host_reachable(host: str, port: int = 443) -> bool:
    """Whether ``host:port`` accepts a TCP connection within 2 s (answer cached 60 s).

    False at once when ``STITCHLAB_OFFLINE``, ``HF_HUB_OFFLINE`` or
    ``TRANSFORMERS_OFFLINE`` is set.  Sources call this before a download so
    an offline machine gets a clear error in seconds instead of a minute of
    retries inside huggingface_hub.
    """
    if offline_flag():
        return False
    now = time.monotonic()
    with _reach_lock:
        hit = _reach_cache.get(host)
        if hit is not None and now - hit[0] < _REACH_TTL_S:
            return hit[1]
    try:
        with socket.create_connection((host, port), timeout=_REACH_TIMEOUT_S):
            ok = True
    except OSError:
        ok = False
    logger.debug("host %s reachable: %s", host, ok)
    with _reach_lock:
        _reach_cache[host] = (now, ok)
    return ok


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON number")


def read_json_config(path: str | os.PathLike, what: str, most: int = MAX_CONFIG_BYTES,
                     fix: str = "give the config.json that save_pretrained() writes") -> dict[str, Any]:
    """The JSON object in ``path`` (a model folder's config), read before any library sees it: a file over
    ``most`` bytes, no regular file, not UTF-8, not JSON (NaN and Infinity included), nested past Python's
    recursion limit, or not an object is refused in one line that starts with ``what`` and names the fix.

    >>> read_json_config("/no/such/config.json", "refused hf:/no/such")
    Traceback (most recent call last):
    ...
    stitchcore.errors.SourceError: refused hf:/no/such: /no/such/config.json is no regular file; give the \
config.json that save_pretrained() writes
    """
    path = Path(path)
    if not path.is_file():  # missing, a folder, a FIFO or a device (reading those blocks or never ends)
        raise SourceError(f"{what}: {path} is no regular file; {fix}")
    size = path.stat().st_size
    if size > most:
        raise SourceError(f"{what}: {path.name} is {size:,} bytes, more than the {most:,} any real model's config "
                          f"needs; {fix}")  # fmt: skip
    try:
        with open(path, "rb") as fh:
            text = fh.read(most + 1).decode("utf-8")
        config = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise SourceError(f"{what}: {path.name} is nested too deeply to be a model config; {fix}") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:  # JSONDecodeError is a ValueError
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:120]
        raise SourceError(f"{what}: {path.name} is not valid JSON ({reason}); {fix}") from e
    if not isinstance(config, dict):
        kind = _JSON_KINDS.get(type(config), type(config).__name__)
        raise SourceError(f"{what}: {path.name} holds a JSON {kind}, not an object; {fix}")
    return config


def check_folder_files(folder: str | os.PathLike, what: str, fix: str) -> None:
    """A model folder's entries checked before any library opens one: each (links followed) a regular file or a
    folder, never a FIFO or a device (opening one blocks, or reads for ever), and no JSON file over
    ``MAX_JSON_BYTES`` (a tokenizer.json of gigabytes); SourceError in one line starting with ``what``.

    >>> check_folder_files("/dev", "refused hf:/dev", "give a folder save_pretrained() wrote")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stitchcore.errors.SourceError: refused hf:/dev: its ... is no regular file ...
    """
    for path in sorted(Path(folder).iterdir()):
        try:
            info = path.stat()
        except OSError:  # a dangling link: the library says what is missing, if it needs it
            continue
        if stat.S_ISDIR(info.st_mode):
            continue
        if not stat.S_ISREG(info.st_mode):
            raise SourceError(f"{what}: its {path.name} is no regular file (a FIFO, socket or device); delete it, "
                              f"or {fix}")  # fmt: skip
        if path.suffix == ".json" and path.name != "config.json" and info.st_size > MAX_JSON_BYTES:
            raise SourceError(f"{what}: its {path.name} is {info.st_size:,} bytes, more than the {MAX_JSON_BYTES:,} "
                              f"any real model's needs; delete it, or {fix}")  # fmt: skip
