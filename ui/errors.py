"""Errors on a page: one red line for the user (:func:`show_error`), shown as text (:func:`ui.text.plain`)."""

from __future__ import annotations

import logging

import streamlit as st

from stitchcore.errors import StitchError
from ui.text import plain

__all__ = ["show_error"]

log = logging.getLogger(__name__)

MOST_CHARS = 600  # an error quoting a 10 KB link value shows its start and its length, not a page of it


def show_error(exc: BaseException, what: str | None = None) -> None:
    """One red line for the user; every page shows its errors through here, as text (a message quoting a link
    or a bundle's ``[x](http://...)`` is never a link).

    A :class:`StitchError` is the user's to fix (a bad ref, an unknown cut): its own message,
    nothing logged.  Anything else is a bug: the traceback goes to the server log and the line
    reads ``unexpected error: Type: message (details in the server log)``, after ``what`` failed
    when given ("loading zoo:x failed: unexpected error: ...").
    """
    if isinstance(exc, StitchError):
        st.error(plain(str(exc) or type(exc).__name__, MOST_CHARS), icon=":material/error:")
        return
    log.error("unexpected error%s", f" while {what}" if what else "", exc_info=exc)
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    detail = type(exc).__name__ + (f": {first[:160]}" if first else "")
    where = f"{what} failed: " if what else ""
    st.error(plain(f"{where}unexpected error: {detail} (details in the server log)", MOST_CHARS),
             icon=":material/error:")
