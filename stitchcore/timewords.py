"""Times for people: when something happened, in the words every page, card and report uses.

>>> import time
>>> date_words(time.mktime((2026, 11, 26, 15, 38, 0, 0, 0, -1)))
'26 Nov 2026, 15:38'
>>> date_words(None)
'an unknown date'
"""

from __future__ import annotations

import time

__all__ = ["date_words"]


def date_words(timestamp: float | None) -> str:
    """A ``time.time()`` value as day, month, year and minute in this machine's time zone."""
    if timestamp is None:
        return "an unknown date"
    return time.strftime("%d %b %Y, %H:%M", time.localtime(timestamp)).lstrip("0")
