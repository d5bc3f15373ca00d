"""Times for people: how long something took and when it happened, in the words every page, card, report
and CLI line uses (an estimate of what is still to come is rounded further: ``experiments.estimate``).

>>> [duration_words(s) for s in (4.23, 42.4, 1944.9, 3720, 90061)]
['4.2 s', '42 s', '32 min 25 s', '1 h 02 min', '25 h 01 min']
>>> import time
>>> date_words(time.mktime((2026, 11, 26, 15, 38, 0, 0, 0, -1)))
'26 Nov 2026, 15:38'
>>> date_words(None)
'an unknown date'
"""

from __future__ import annotations

import time

__all__ = ["date_words", "duration_words", "usable_time"]

LATEST_TIME = 32503680000.0  # 3000-01-01: a stored time past it (or not a finite number) is no date


def duration_words(seconds: float | None) -> str:
    """A measured duration: tenths of a second under 10 s, whole seconds under a minute, then minutes and
    seconds, and from an hour on hours and minutes (``"4.2 s"``, ``"32 min 25 s"``, ``"1 h 02 min"``);
    ``"—"`` for a missing or negative value."""
    if seconds is None or not seconds >= 0:  # None, NaN, negative
        return "—"
    if seconds < 9.95:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min"


def usable_time(timestamp: object) -> float | None:
    """A stored ``time.time()`` value a clock can show, else None: a row imported before bundles were checked
    may hold ``-Infinity``, NaN or 2**77, which ``time.localtime`` and ``datetime`` refuse with a traceback.

    >>> usable_time(1.7e9), usable_time(float("-inf")), usable_time(float("nan")), usable_time(2**77), usable_time("x")
    (1700000000.0, None, None, None, None)
    """
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)):
        return None
    return float(timestamp) if 0 <= timestamp <= LATEST_TIME else None  # NaN fails both comparisons


def date_words(timestamp: float | None) -> str:
    """A ``time.time()`` value as day, month, year and minute in this machine's time zone ("an unknown date"
    for one :func:`usable_time` refuses)."""
    timestamp = usable_time(timestamp)
    if timestamp is None:
        return "an unknown date"
    return time.strftime("%d %b %Y, %H:%M", time.localtime(timestamp)).lstrip("0")
