"""The backend saved per store: ``settings.json`` in the store directory, written by the Settings page.

A server started on a store runs its jobs where the last Save said (else ``$STITCHLAB_BACKEND``).

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

__all__ = ["SETTINGS_FILE", "save_options", "saved_options"]

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


def save_options(root: str | Path, options: RunOptions) -> None:
    """Save ``options`` as this store's backend (other keys of the file are kept), atomically."""
    path = Path(root) / SETTINGS_FILE
    try:
        saved = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        saved = {}
    write_atomic(path, json.dumps({**saved, "backend": options.to_dict()}, indent=1))
