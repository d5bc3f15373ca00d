"""What the Settings page saves per store: ``settings.json`` in the store directory.

A server started on a store runs its jobs where the last Save said (else ``$STITCHLAB_BACKEND``), and logs the
runs that finish to the experiment tracker saved there, if any (``saved_tracker``).

>>> import tempfile
>>> root = tempfile.mkdtemp()
>>> saved_options(root) is None
True
>>> save_options(root, RunOptions("ray", address="10.0.0.5:6379"))
>>> saved_options(root).address
'10.0.0.5:6379'
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from stitchcore.backends import RunOptions
from stitchcore.errors import StitchError
from stitchcore.store.canonical_json import write_atomic

__all__ = ["SETTINGS_FILE", "save_options", "save_tracker", "saved_options", "saved_tracker"]

log = logging.getLogger(__name__)

SETTINGS_FILE = "settings.json"  # in the store directory: what the Settings page saved


def saved_options(root: str | Path) -> RunOptions | None:
    """The backend the Settings page saved for this store, None if none (or unreadable: logged)."""
    path = Path(root) / SETTINGS_FILE
    if not path.exists():
        return None
    try:
        return RunOptions.from_dict(json.loads(path.read_text()).get("backend"))
    except (OSError, ValueError, TypeError, StitchError) as exc:
        log.warning("ignoring %s: %s", path, exc)
        return None


def _saved(root: str | Path) -> dict:
    path = Path(root) / SETTINGS_FILE
    try:
        saved = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        saved = {}
    return saved if isinstance(saved, dict) else {}


def _save(root: str | Path, key: str, value: object) -> None:
    """Set one key of the file (the others kept), atomically; None removes it."""
    saved = {k: v for k, v in _saved(root).items() if k != key}
    write_atomic(Path(root) / SETTINGS_FILE, json.dumps({**saved, **({key: value} if value is not None else {})},
                                                        indent=1))


def save_options(root: str | Path, options: RunOptions) -> None:
    """Save ``options`` as this store's backend (other keys of the file are kept), atomically."""
    _save(root, "backend", options.to_dict())


def saved_tracker(root: str | Path) -> str | None:
    """The experiment tracker finished runs are logged to (``mlflow:DIR``, ``tensorboard:DIR``), None if none.

    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> save_tracker(root, "tensorboard:/tmp/tb"); saved_tracker(root)
    'tensorboard:/tmp/tb'
    >>> save_tracker(root, None); saved_tracker(root) is None
    True
    """
    value = _saved(root).get("log_to")
    return value if isinstance(value, str) and value.strip() else None


def save_tracker(root: str | Path, target: str | None) -> None:
    """Save (or with None clear) the tracker this store's server logs finished runs to."""
    _save(root, "log_to", target)
