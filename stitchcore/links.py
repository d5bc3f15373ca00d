"""The address other machines reach a StitchLab server at: the base of every link it hands out (a class's
students' link, its QR code), never ``localhost``, which on a student's laptop is their own computer.

The app (``ui.serving``) and ``python -m stitchcore app`` both use :func:`public_base`.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["BASE_URL_ENV", "CLASS_ENV", "KEY_ENV", "LOOPBACK_NAMES", "local_only", "public_base"]

KEY_ENV = "STITCHLAB_TEACHER_KEY"  # the teacher's key: set, the app runs a class (ui.roles)
CLASS_ENV = "STITCHLAB_CLASS"  # "1": class mode with a key the app makes at start
BASE_URL_ENV = "STITCHLAB_BASE_URL"  # the base of the links handed out, when the network name is not the right one
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0", "::", ""}  # meaningless to another machine
WILDCARD_BINDS = {"0.0.0.0", "::", ""}  # a server bound to every address (Streamlit's default when none is set)


def local_only(bind: str | None) -> bool:
    """Whether a server bound to ``bind`` listens on this machine only (no other machine can reach it).

    >>> local_only("localhost"), local_only("127.0.0.2"), local_only("0.0.0.0"), local_only(None)
    (True, True, False, False)
    """
    bind = (bind or "").strip("[]")
    return bind in ("localhost", "::1") or bind.startswith("127.")


def public_base(browser_url: str, *, configured: str | None = None, bind: str | None = None,
                hostname: str = "", base_path: str = "") -> str:  # fmt: skip
    """The scheme, host, port and base path other machines open, without a trailing slash.

    >>> public_base("http://localhost:8611/lessons?x=1", bind="0.0.0.0", hostname="lab-pc")
    'http://lab-pc:8611'
    >>> public_base("http://localhost:8611/", bind="192.168.1.20", hostname="lab-pc")
    'http://192.168.1.20:8611'
    >>> public_base("http://127.0.0.2:8611/lessons", bind="127.0.0.2", hostname="lab-pc", base_path="stitch")
    'http://127.0.0.2:8611/stitch'
    >>> public_base("http://localhost:8611/", configured="https://class.example.org/stitch/")
    'https://class.example.org/stitch'
    >>> public_base("http://localhost:8501/", bind="localhost", hostname="lab-pc")  # no other machine reaches it
    'http://localhost:8501'
    """
    if configured:
        return configured.rstrip("/")
    parts = urlsplit(browser_url)
    host = parts.hostname or ""
    if host in LOOPBACK_NAMES and not local_only(bind):
        host = bind if bind and bind not in LOOPBACK_NAMES else (hostname or host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address in a URL
    netloc = f"{host}:{parts.port}" if parts.port else host
    path = "/" + base_path.strip("/") if base_path.strip("/") else ""
    return f"{parts.scheme or 'http'}://{netloc}{path}"
