"""CLI verb ``app``: start the web app (Streamlit) on this store, for one person or for a class.

    python -m stitchcore app                              # http://localhost:8501, this machine only
    python -m stitchcore app --class                      # a class on the local network: prints the teacher's link
    python -m stitchcore app --class --base-url http://lab-pc.school.lan:8501   # the links students get

``--class`` serves on every network address (``--address 0.0.0.0``) with a teacher key (``--key``, else one is
made): the session that opens any page once with ``?key=KEY`` is the teacher's, every other one a student's,
which sees only the lessons' student views and changes nothing (app: ``ui.roles``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import secrets
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stitchcore.cli._args import given, safe, whole
from stitchcore.cli._common import Command, ProgressBar
from stitchcore.errors import StitchError
from stitchcore.links import BASE_URL_ENV, CLASS_ENV, KEY_ENV, public_base

if TYPE_CHECKING:
    from stitchcore.store.results import Store

__all__ = ["COMMANDS", "add_verbs", "app_command"]

SOURCE_APP = Path(__file__).resolve().parents[2] / "app.py"  # the router beside the package (a source checkout)


def app_script() -> Path | None:
    """The app's router: ``app.py`` beside the package in a source checkout, else the copy an installed wheel
    holds (``stitchlab/webapp/app.py``, see setup.py); None when neither is there.

    >>> app_script().name
    'app.py'
    """
    if SOURCE_APP.is_file():
        return SOURCE_APP
    found = importlib.util.find_spec("stitchlab")
    for folder in (found.submodule_search_locations or []) if found is not None else []:
        installed = Path(folder) / "webapp" / "app.py"
        if installed.is_file():
            return installed
    return None


def add_verbs(verbs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``app`` to the CLI."""
    p = verbs.add_parser("app", parents=[common], help="start the web app (--class: for a class on the network)")
    p.add_argument("--class", dest="classroom", action="store_true",
                   help="class mode: a teacher key, students see only the lessons' student views (serves on "
                        "every address unless --address)")  # fmt: skip
    p.add_argument("--key", type=_key, default=None,
                   help="the teacher key, letters, digits and - _ . ~ (default: $STITCHLAB_TEACHER_KEY, else one is "
                        "made)")  # fmt: skip
    p.add_argument("--address", type=_host, default=None,
                   help="the address to serve on (default: localhost; with --class 0.0.0.0, every address)")
    p.add_argument("--port", type=whole, default=8501, help="the port (default 8501)")
    p.add_argument("--base-url", type=given, default=None,
                   help="the address students' links and QR codes use (default: this machine's network name)")
    p.add_argument("--viewer", action="store_true", help="viewer mode: results only, no new runs")
    p.add_argument("--print-only", action="store_true", help="print the links and the server command; start nothing")


_KEY = re.compile(r"[A-Za-z0-9._~-]{1,200}")  # a key travels in links (?key=KEY): URL-safe, unescaped
_HOST = re.compile(r"[A-Za-z0-9:\[][A-Za-z0-9.:_\[\]-]{0,252}")  # a host name, an IPv4 or an IPv6 address


def _key(text: str) -> str:
    """``--key``: URL-safe characters only (it is put in the teacher's link as it is).

    >>> _key("k3y-2024")
    'k3y-2024'
    >>> _key("a b")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: use 1 to 200 letters, digits and - _ . ~ (it goes into a link), not 'a b'
    """
    if not _KEY.fullmatch(text):
        shown = safe(text if len(text) <= 40 else text[:37] + "...")
        raise argparse.ArgumentTypeError(f"use 1 to 200 letters, digits and - _ . ~ (it goes into a link), not '{shown}'")
    return text


def _host(text: str) -> str:
    """``--address``: a host name or an IP address to serve on.

    >>> _host("0.0.0.0"), _host("::1")
    ('0.0.0.0', '::1')
    >>> _host("/dev/zero")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected a host name or an IP address (e.g. localhost, 0.0.0.0), not '/dev/zero'
    """
    if not _HOST.fullmatch(text):
        shown = safe(text if len(text) <= 40 else text[:37] + "...")
        raise argparse.ArgumentTypeError(f"expected a host name or an IP address (e.g. localhost, 0.0.0.0), not '{shown}'")
    return text


def app_command(args: argparse.Namespace, store_root: Path | None = None) -> tuple[list[str], dict[str, str], list[str]]:
    """The ``streamlit run`` command line, the environment changes (the store at ``store_root``, the key ...) and
    the lines to print for ``args``.

    >>> ns = argparse.Namespace(classroom=True, key="k3y", address=None, port=8611, base_url=None, viewer=False,
    ...                         store=None)
    >>> cmd, env, lines = app_command(ns)
    >>> cmd[-4:], env[KEY_ENV], "?key=k3y" in lines[1]
    (['--server.address', '0.0.0.0', '--server.port', '8611'], 'k3y', True)
    """
    if not 1 <= args.port <= 65535:
        raise StitchError(f"--port is 1 to 65535, not {args.port}")
    app = app_script()
    if app is None:
        raise StitchError("the web app's files are missing: install the package with its app "
                          "(pip install 'stitchlab[app]'), or run from a source checkout")
    if importlib.util.find_spec("streamlit") is None:
        raise StitchError("the web app needs Streamlit: pip install 'stitchlab[app]' (or -r requirements.txt)")
    address = args.address or ("0.0.0.0" if args.classroom else "localhost")
    env: dict[str, str] = {}
    if store_root is not None:
        env["STITCHLAB_STORE"] = str(store_root)
    if args.viewer:
        env["STITCHLAB_VIEWER"] = "1"
    if args.base_url:
        if not args.base_url.startswith(("http://", "https://")) or safe(args.base_url) != args.base_url or " " in args.base_url:
            raise StitchError(f"--base-url starts with http:// or https:// and holds no spaces or control characters, "
                              f"not '{safe(args.base_url)}'")
        env[BASE_URL_ENV] = args.base_url
    base = public_base(f"http://{address}:{args.port}/", configured=args.base_url, bind=address,
                       hostname=socket.gethostname() if args.classroom else "localhost")  # fmt: skip
    lines = [f"StitchLab on {base}"]
    if args.classroom:
        key = args.key or os.environ.get(KEY_ENV, "").strip() or secrets.token_urlsafe(16)
        env[KEY_ENV], env[CLASS_ENV] = key, "1"
        lines += [f"  Teacher, open once (keep it to yourself): {base}/?key={key}",
                  f"  Students: {base}/lessons (the presenter's page gives each step's link and QR code)"]  # fmt: skip
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.address", address, "--server.port",
           str(args.port)]  # fmt: skip
    return cmd, env, lines


def _cmd_app(args: argparse.Namespace, store: Store, bar: ProgressBar) -> int:
    cmd, env, lines = app_command(args, Path(store.root).resolve())
    for line in lines:
        print(line, file=sys.stderr, flush=True)
    if args.print_only:
        print(" ".join(cmd))
        return 0
    store.close()  # the server opens its own
    return subprocess.call(cmd, env={**os.environ, **env}, cwd=app_script().parent)  # its .streamlit/config.toml


COMMANDS: dict[tuple[str, str | None], Command] = {("app", None): _cmd_app}
