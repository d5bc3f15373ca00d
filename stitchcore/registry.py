"""One registry type behind every named table: adapters, archs, datasets, sources, measures, experiments.

Registering a name twice raises; an unknown name raises a :class:`StitchError` subclass that
lists the close names; ``list(pattern)`` filters with a shell-style glob, in registration order.

>>> colours = Registry[str]("colour")
>>> colours.register("red")("#f00")
'#f00'
>>> _ = colours.register("green")("#0f0")
>>> colours.list(), colours.list("g*")
(['red', 'green'], ['green'])
>>> colours.get("gren")
Traceback (most recent call last):
...
stitchcore.errors.StitchError: unknown colour 'gren'; did you mean 'green'? (known: red, green)
>>> colours.register("red")("#e00")
Traceback (most recent call last):
...
ValueError: colour 'red' is already registered
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from stitchcore.errors import StitchError

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> entry table.

    ``what`` names the entries in messages ("adapter kind", "dataset"); ``error`` is the
    :class:`StitchError` subclass raised for an unknown name (so a page or the CLI can tell
    a bad dataset from a bad adapter); ``hint`` is appended to that message.
    """

    def __init__(self, what: str, error: type[StitchError] = StitchError, hint: str = "") -> None:
        self.what = what
        self.error = error
        self.hint = hint
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator (or plain call) adding ``entry`` under ``name``; a second registration raises."""

        def deco(entry: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.what} {name!r} is already registered")
            self._entries[name] = entry
            return entry

        return deco

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests that register a temporary entry); a missing name is ignored."""
        self._entries.pop(name, None)

    def get(self, name: str) -> T:
        """The entry for ``name``; unknown: ``self.error`` naming the close names and the known ones."""
        try:
            return self._entries[name]
        except KeyError:
            raise self.error(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        """The one-line message for an unknown ``name``: close names first, then every known name."""
        close = difflib.get_close_matches(str(name), list(self._entries), n=3, cutoff=0.6)
        guess = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        hint = f"; {self.hint}" if self.hint else ""
        return f"unknown {self.what} {name!r}{guess} (known: {', '.join(self._entries)}){hint}"

    def list(self, pattern: str = "*") -> list[str]:
        """Registered names matching the glob ``pattern``, in registration order."""
        return [n for n in self._entries if fnmatch.fnmatchcase(n, pattern)]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {len(self)} entries)"
