"""Uploaded checkpoints, kept under the store: ``<store root>/uploads/<sha256[:16]>-<safe name>``.

Content-addressed and written atomically, so the same bytes always land on the same path (and
so give the same ``file:`` ref, see :func:`stitchcore.models.refs.upload_ref`).  Nothing is
loaded here: reading a checkpoint is :mod:`stitchcore.models.sources.checkpoint`'s job.

What already lies at that path is trusted only when it is a regular file holding those bytes (a link,
a folder or other bytes planted under the name are replaced, or refused in one line); an ``uploads``
entry that is not a folder, and a write that fails (a full disk, a read-only store), are one-line
:class:`~stitchcore.errors.CheckpointError` s that name the fix.

>>> _safe_name("../../My Model (v2).PT")
'My_Model_v2.pt'
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
from pathlib import Path
from typing import Any

from stitchcore.errors import CheckpointError

__all__ = ["UPLOAD_DIR", "UPLOAD_EXTS", "save_upload"]

UPLOAD_EXTS = (".pt", ".pth", ".safetensors")  # what the upload accepts; all read without running pickles
UPLOAD_DIR = "uploads"  # under the store root, beside blobs/
_NAME_LIMIT = 80  # characters kept of the uploaded file's name (the hash keeps names unique)


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
    digest = hashlib.sha256(data).hexdigest()
    path = folder / f"{digest[:16]}-{_safe_name(filename)}"
    try:
        if (folder.exists() or folder.is_symlink()) and not folder.is_dir():  # a file, or a dangling link
            raise CheckpointError(f"{folder} is not a folder (uploads are kept there): move it away and upload "
                                  "again")  # fmt: skip
        folder.mkdir(parents=True, exist_ok=True)
        if _holds(path, data, digest):
            return path
        if path.is_dir() and not path.is_symlink():
            raise CheckpointError(f"{path} is a folder where the upload belongs: move it away and upload again")
        tmp = folder / f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)  # a link planted at the name is replaced, never followed
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as exc:
        raise CheckpointError(f"cannot save the upload in {folder} ({exc.strerror or exc}): free some space or "
                              "use a store you can write to, then upload again") from None  # fmt: skip
    return path


def _holds(path: Path, data: bytes, digest: str) -> bool:
    """Whether ``path`` is a regular file (not a link) holding exactly ``data`` (sha256 ``digest``)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
        return False
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest() == digest
