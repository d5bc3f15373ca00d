"""User-facing error types.

Every error a person can cause (bad model ref, missing file, incompatible cuts,
NaN loss ...) is raised as a subclass of :class:`StitchError` whose message is
one line that names the fix.  The CLI prints ``error: <message>`` and exits 2;
the app shows the message in a red box.  Anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

__all__ = [
    "StitchError",
    "RefError",
    "SourceError",
    "CheckpointError",
    "CutError",
    "AdapterError",
    "DataError",
    "TrainingError",
    "StoreError",
    "RunBusy",
    "Cancelled",
    "shown",
]


class StitchError(Exception):
    """Base class: an error caused by input, with a one-line message naming the fix.

    ``fix``, where one change of a spec field makes the input valid: that field (dotted for a nested one) and
    the value, so a form can offer it as a button (``adapter.init`` -> ``random`` for a kind that cannot fit
    a least-squares start).

    >>> StitchError("lstsq init needs a linear adapter; use init='random'", fix={"adapter.init": "random"}).fix
    {'adapter.init': 'random'}
    """

    def __init__(self, *args: object, fix: dict[str, object] | None = None) -> None:
        super().__init__(*args)
        self.fix = dict(fix or {})


class RefError(StitchError):
    """A ModelRef string that cannot be parsed or names nothing known."""


class SourceError(StitchError):
    """A model that cannot be loaded (offline hub weights, missing package ...)."""


class CheckpointError(SourceError):
    """A checkpoint file that is missing, truncated, unsafe or mismatches its architecture."""


class CutError(StitchError):
    """A cut name that does not exist, or a model that cannot be cut."""


class AdapterError(StitchError):
    """A sender/receiver pair no adapter can join, or a bad adapter spec."""


class DataError(StitchError):
    """A dataset that cannot be found, is empty, or lacks classes."""


class TrainingError(StitchError):
    """Training that cannot go on (NaN/inf loss, out of memory)."""


class StoreError(StitchError):
    """A results-store problem (unknown run id, corrupt blob ...)."""


class RunBusy(StoreError):
    """The run is queued or running in another live process (``owner``: 'host:pid'); wait or cancel it."""

    def __init__(self, run_id: str, owner: str) -> None:
        super().__init__(f"run {run_id} is running in process {owner}: wait for it, or stop it with"
                         f" `python -m stitchcore runs cancel {run_id}`")
        self.run_id, self.owner = run_id, owner


class Cancelled(StitchError):
    """Raised inside a run when its cancel event is set.  ``status``: how the run is recorded, "cancelled" (a
    person stopped it) or "interrupted" (what ran it went away: a server or its pipe closed, not a person)."""

    def __init__(self, message: str = "cancelled by the user", status: str = "cancelled") -> None:
        super().__init__(message)
        self.status = status if status in ("cancelled", "interrupted") else "cancelled"


def shown(value: object, most: int = 40) -> str:
    """``repr(value)`` cut to ``most`` characters: a message quotes a value a person gave, never a whole huge one
    (a 5,000-digit number, a 10 KB link value).

    >>> shown("x" * 100, 10), shown(7)
    ("'xxxxxx...", '7')
    """
    text = repr(value)
    return text if len(text) <= most else text[: most - 3] + "..."
