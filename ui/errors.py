"""Errors on a page: one red line for the user (:func:`show_error`), Markdown escaped (:func:`md_text`)."""

from __future__ import annotations

import logging

import streamlit as st

from stitchcore.errors import StitchError

__all__ = ["show_error", "md_text"]

log = logging.getLogger(__name__)


def md_text(text: str) -> str:
    """Escape Markdown so labels like ``zoo:a[block1]`` show their brackets."""
    return "".join("\\" + ch if ch in "\\`*_{}[]<>()#+-!|~$" else ch for ch in text)


def show_error(exc: BaseException, what: str | None = None) -> None:
    """One red line for the user; every page shows its errors through here.

    A :class:`StitchError` is the user's to fix (a bad ref, an unknown cut): its own message,
    nothing logged.  Anything else is a bug: the traceback goes to the server log and the line
    reads ``unexpected error: Type: message (details in the server log)``, after ``what`` failed
    when given ("loading zoo:x failed: unexpected error: ...").
    """
    if isinstance(exc, StitchError):
        st.error(str(exc) or type(exc).__name__, icon=":material/error:")
        return
    log.error("unexpected error%s", f" while {what}" if what else "", exc_info=exc)
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    detail = type(exc).__name__ + (f": {first[:160]}" if first else "")
    where = f"{what} failed: " if what else ""
    st.error(f"{where}unexpected error: {detail} (details in the server log)", icon=":material/error:")
