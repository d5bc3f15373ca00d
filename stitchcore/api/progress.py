"""A run's progress where a person watches it: tqdm's bar (``tqdm.auto``: a widget in Jupyter, a text bar in a
terminal), with the time left; where the output is read later (a pipe, a log file) nothing, unless asked, and then a
plain line now and then, never a carriage-return bar written into a log.

The ``progress`` callback of ``run_experiment`` (``bar(fraction, message, metrics)``); the CLI and the Python API
both use it.
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import Any, TextIO

__all__ = ["SHOW", "ProgressBar", "in_notebook", "quiet_tqdm_auto", "watched"]

SHOW = ("auto", "always", "never")  # auto: a bar where a person watches; always: lines even into a pipe; never
LINE_EVERY_S = 5.0  # a piped log asked for progress gets at most one line this often (and the last)
STEPS = 1000  # the bar counts thousandths of the run


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (its IPython shell is the kernel's; a process that merely imported
    IPython or ipykernel is not)."""
    if "IPython" not in sys.modules:
        return False
    shell = sys.modules["IPython"].get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def watched(stream: TextIO) -> bool:
    """Whether a person watches ``stream``: a notebook kernel runs, or it is a terminal.

    >>> import io
    >>> watched(io.StringIO())
    False
    """
    if in_notebook():
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _tqdm() -> type:
    """tqdm's notebook widget where a notebook can draw it (ipywidgets installed), else its text bar (a notebook
    redraws that too, without tqdm.auto's warning that the widget is missing)."""
    if in_notebook():
        try:
            import ipywidgets  # noqa: F401

            from tqdm.notebook import tqdm
        except ImportError:
            from tqdm.std import tqdm
        return tqdm
    from tqdm.std import tqdm

    return tqdm


def quiet_tqdm_auto() -> None:
    """Import ``tqdm.auto`` once without its warning that notebook widgets are missing (the model libraries import it
    and would print that warning into a notebook; a text bar is what this module draws there)."""
    if in_notebook() and "tqdm.auto" not in sys.modules:
        from tqdm.std import TqdmWarning

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TqdmWarning)
            import tqdm.auto  # noqa: F401


def _safe(text: str) -> str:
    """``text`` with control characters escaped (a run label can hold anything a user typed)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class ProgressBar:
    """``bar(fraction, message, metrics)`` draws a run's progress; ``close()`` ends it.

    ``show``: ``"auto"`` (or True) a bar where a person watches (:func:`watched`), else nothing; ``"always"`` the
    same bar, or plain lines every :data:`LINE_EVERY_S` into a pipe; ``"never"`` (or False) nothing.

    >>> import io
    >>> out = io.StringIO()
    >>> bar = ProgressBar("always", stream=out)
    >>> bar(0.5, "epoch 1/2", {"loss": 0.25}); bar(1.0, "done", {}); bar.close()
    >>> out.getvalue()
    ' 50.0% epoch 1/2  loss=0.25\\n100.0% done\\n'
    >>> ProgressBar("auto", stream=io.StringIO()).enabled
    False
    """

    def __init__(self, show: str | bool = "auto", *, stream: TextIO | None = None) -> None:
        show = {True: "auto", False: "never"}.get(show, show)  # type: ignore[arg-type]
        if show not in SHOW:
            raise ValueError(f"show is one of {', '.join(SHOW)}, not {show!r}")
        self.stream = stream if stream is not None else sys.stderr
        live = watched(self.stream)
        self.mode = "never" if show == "never" else "bar" if live else "lines" if show == "always" else "never"
        self._bar: Any = None
        self._last = 0.0

    @property
    def enabled(self) -> bool:
        """Whether anything is drawn."""
        return self.mode != "never"

    def __call__(self, fraction: float, message: str = "", metrics: dict[str, float] | None = None) -> None:
        if self.mode == "never":
            return
        extra = "  ".join(f"{k}={v:.4g}" for k, v in (metrics or {}).items())
        if self.mode == "bar":
            self._draw(fraction, _safe(message)[:60], _safe(extra))
            return
        now = time.monotonic()
        if now - self._last < LINE_EVERY_S and fraction < 1.0:
            return
        self._last = now
        self.stream.write(f"{fraction:6.1%} {_safe(message)}" + (f"  {_safe(extra)}" if extra else "") + "\n")
        self.stream.flush()

    def _draw(self, fraction: float, message: str, extra: str) -> None:
        if self._bar is None:
            tqdm = _tqdm()
            self._bar = tqdm(total=STEPS, file=self.stream, leave=True, dynamic_ncols=True,
                             bar_format="{percentage:3.0f}%|{bar:24}| {desc} [{elapsed}<{remaining}] {postfix}")
        self._bar.set_description_str(message, refresh=False)
        self._bar.set_postfix_str(extra, refresh=False)
        self._bar.update(max(0, min(STEPS, round(fraction * STEPS)) - self._bar.n))

    def close(self) -> None:
        """End the bar (its line stays, and what follows starts on a fresh one)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
