"""A run started with ``background=True``: it runs in a thread of this process while the notebook goes on;
:class:`RunHandle` says how far it is, waits for it or stops it."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from stitchcore.errors import Cancelled, StitchError

if TYPE_CHECKING:
    from stitchcore.api.result import Result

__all__ = ["RunHandle"]


class RunHandle:
    """A run going on in the background: ``run_id`` at once, ``progress`` (fraction, message) live, ``wait()``
    for its :class:`~stitchcore.api.result.Result`, ``cancel()`` to stop it (stored as cancelled)."""

    def __init__(self, run_id: str, start: Any) -> None:
        """``start(progress, cancel)`` runs the experiment and returns its Result (called in the thread)."""
        self.run_id = run_id
        self._cancel = threading.Event()
        self._progress: tuple[float, str] = (0.0, "queued")
        self._result: Result | None = None
        self._error: BaseException | None = None
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, args=(start,), name=f"stitchcore-run-{run_id}", daemon=True)
        self._thread.start()

    def _run(self, start: Any) -> None:
        def progress(fraction: float, message: str = "", metrics: dict | None = None) -> None:
            self._progress = (float(fraction), message)

        try:
            self._result = start(progress, self._cancel)
            self._progress = (1.0, "done")
        except BaseException as exc:  # noqa: BLE001 - kept for wait(), which raises it in the caller's thread
            self._error = exc

    @property
    def progress(self) -> tuple[float, str]:
        """How far the run is (0..1) and what it is doing."""
        return self._progress

    def done(self) -> bool:
        """Whether the run has ended (finished, failed or stopped)."""
        return not self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> Result:
        """The run's Result once it ends; the run's own error if it failed (Cancelled if stopped); TimeoutError if
        it is still running after ``timeout`` seconds (it goes on)."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"run {self.run_id} is still running ({self._progress[0]:.0%}: {self._progress[1]})")
        if self._error is not None:
            raise self._error
        if self._result is None:  # pragma: no cover - the thread either stores a result or an error
            raise StitchError(f"run {self.run_id} ended without a result")
        return self._result

    def cancel(self) -> None:
        """Stop the run at its next step; it is stored as cancelled and ``wait()`` raises Cancelled."""
        self._cancel.set()

    def __repr__(self) -> str:
        if self._error is not None:
            state = "cancelled" if isinstance(self._error, Cancelled) else f"failed: {self._error}"
        elif self.done():
            state = "done"
        else:
            fraction, message = self._progress
            state = f"{fraction:.0%} {message} ({time.monotonic() - self._started:.0f} s)"
        return f"<RunHandle {self.run_id}: {state}>"
