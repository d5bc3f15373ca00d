"""Helpers shared by the hub sources (timm, torchvision, hf): query booleans, seeds, a fast offline probe."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

from stitchcore.errors import RefError
from stitchcore.models.refs import ModelRef

__all__ = ["host_reachable", "parse_bool", "refuse_seed"]

logger = logging.getLogger(__name__)


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


def _offline_flag() -> bool:
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
    if _offline_flag():
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
