"""The address other machines reach this server at: the base of every link the app hands out (the students'
link, its QR code), never ``localhost``, which on a student's laptop is their own computer.

``$STITCHLAB_BASE_URL`` (``python -m stitchcore app --base-url``) wins; else the address the teacher's browser
used, with a loopback name (``localhost``, ``127.0.0.1``, ``::1``) replaced by the address the server is bound to
when that is a specific one, else by this machine's network name.
"""

from __future__ import annotations

import io
import os
import socket

import streamlit as st

from stitchcore.links import BASE_URL_ENV, local_only, public_base

__all__ = ["listens_locally", "public_base_url", "qr_png"]


def listens_locally() -> bool:
    """Whether this server is bound to this machine only (``localhost``), so no student's machine reaches it."""
    return local_only(st.get_option("server.address")) and not os.environ.get(BASE_URL_ENV, "").strip()


def public_base_url() -> str:
    """This server's address for links other machines open (see the module); "" outside a browser session."""
    try:
        browser = st.context.url or ""
    except Exception:  # noqa: BLE001 - no browser (a test's AppTest): relative links
        browser = ""
    configured = os.environ.get(BASE_URL_ENV, "").strip() or None
    if not browser and not configured:
        return ""
    return public_base(browser, configured=configured, bind=st.get_option("server.address"),
                       hostname=socket.gethostname(), base_path=st.get_option("server.baseUrlPath") or "")  # fmt: skip


def qr_png(url: str, *, scale: int = 6) -> bytes:
    """``url`` as a QR code (PNG bytes) a phone or laptop camera opens."""
    import segno

    out = io.BytesIO()
    segno.make(url, error="m").save(out, kind="png", scale=scale, border=2)
    return out.getvalue()
