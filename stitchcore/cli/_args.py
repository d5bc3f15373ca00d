"""What a flag's text may be, and what the CLI prints of text it did not write: argument types that refuse
text, ``²``, 40-digit numbers, empty strings, FIFOs and devices in one line (``whole``, ``number``, ``bounded``,
``given``, ``model_ref``, ``data_name``, ``device_name``, ``out_path``, ``store_dir``, ``in_file``, ``pair``,
``json_obj``, ``names``), and :func:`safe`, which writes control characters visibly.  Private to
:mod:`stitchcore.cli`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stitchcore.errors import StitchError

__all__ = ["MAX_THREADS", "bounded", "data_name", "device_name", "given", "in_file", "json_obj", "model_ref", "names",
           "number", "out_path", "pair", "safe", "safe_text", "store_dir", "whole"]

MAX_THREADS = 1024  # torch CPU threads: above any machine's cores; 10**9 made libgomp abort the process (216 GB)
_WHOLE = re.compile(r"[+-]?[0-9]{1,40}")  # ASCII digits only: int() takes "٣" (Arabic-Indic 3), not "²"
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,4})?|[+-]?(nan|inf|infinity)", re.IGNORECASE)
_DEVICE = re.compile(r"auto|cpu|mps|cuda(:[0-9]{1,3})?")  # pick_device's spellings; whether it is here: at run time
_BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}  # marks, embeddings, overrides
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _shown(text: str) -> str:
    r"""``text`` quoted for a one-line message: control characters escaped, at most 40 characters.

    >>> print(_shown("x" * 50), _shown("a\x1b"))
    'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...' 'a\x1b'
    """
    return f"'{safe(text) if len(text) <= 40 else safe(text[:37]) + '...'}'"


def whole(text: str) -> int:
    """Argument type: a whole number in ASCII digits; the flag's range is its spec's to check (it names it).

    Python's ``int()`` takes "٣" (an Arabic-Indic 3) but not "²", though both are ``isdigit()``: neither is
    taken, so a number means the same in every verb and never reaches ``int()`` half-checked.

    >>> whole("12"), whole("-3"), whole(" 7 ")
    (12, -3, 7)
    >>> whole("٣")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected a whole number, not '٣'
    """
    if not _WHOLE.fullmatch(text.strip()):
        if re.fullmatch(r"[+-]?[0-9]+", text.strip()):  # int() itself gives up past 4300 digits
            raise argparse.ArgumentTypeError(f"{_shown(text)} has more than 40 digits: no count or seed is that large")
        raise argparse.ArgumentTypeError(f"expected a whole number, not {_shown(text)}")
    return int(text)


def number(text: str) -> float:
    """Argument type: a decimal number in ASCII (``1e-3``, ``0.5``); ``nan`` and ``inf`` pass, for the spec to
    refuse naming its field.

    >>> number("1e-3"), number(".5"), number("nan") != number("nan")
    (0.001, 0.5, True)
    >>> number("1_000")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected a number such as 0.01 or 1e-3, not '1_000'
    """
    if not _NUMBER.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"expected a number such as 0.01 or 1e-3, not {_shown(text)}")
    return float(text)


def bounded(least: int, most: int | None = None) -> Callable[[str], int]:
    """Argument type: a whole number (:func:`whole`) from ``least`` to ``most``, for flags no spec checks.

    >>> bounded(1, 10)("3")
    3
    >>> bounded(1, 10)("11")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be at most 10, not 11
    """

    def parse(text: str) -> int:
        value = whole(text)
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, not {value}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"must be at most {most}, not {value}")
        return value

    parse.__name__ = "whole number"
    return parse


def given(text: str) -> str:
    """Argument type: any text but an empty one (``--dataset ""`` would quietly mean the default).

    >>> given("digits")
    'digits'
    >>> given(" ")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: is empty: give a value, or leave the flag out for its default
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a value, or leave the flag out for its default")
    return text


def model_ref(text: str) -> str:
    """Argument type of a model ref (:func:`given`): a ``file:PATH`` (with its ``?options``) is refused when a
    FIFO, a device or a folder is there, before anything opens it (a checkpoint read from a FIFO waited
    forever).  A missing file is left to the loader, whose message names the fix.

    >>> model_ref("zoo:cnn-digits-s0"), model_ref("file:/nonexistent.pt?arch=zoo:cnn")
    ('zoo:cnn-digits-s0', 'file:/nonexistent.pt?arch=zoo:cnn')
    >>> model_ref("file:/dev/zero")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: checkpoint /dev/zero is a device, not a file: give a .pt, .pth or .safetensors file
    """
    if not text.strip():  # the ref parser's own words: what a model ref looks like
        from stitchcore.models.refs import parse_ref

        try:
            parse_ref(text)
        except StitchError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return _file_part(text, "checkpoint", "give a .pt, .pth or .safetensors file")


def data_name(text: str) -> str:
    """Argument type of a dataset or corpus name (:func:`given`): a ``file:PATH`` corpus is refused as
    :func:`model_ref` refuses a checkpoint.

    >>> data_name("digits")
    'digits'
    >>> data_name("file:/dev/zero")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: text file /dev/zero is a device, not a file: give a plain text file
    """
    return _file_part(text, "text file", "give a plain text file")


def _file_part(text: str, what: str, fix: str) -> str:
    given(text)
    if text.startswith("file:"):
        path = Path(text[len("file:"):].split("?", 1)[0]).expanduser()
        if os.path.lexists(path):  # missing: the loader says so, naming the fix
            try:
                in_file(path, what, fix)
            except StitchError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def device_name(text: str) -> str:
    """Argument type ``--device``: one of pick_device's spellings (whether this machine has it is checked
    when a command uses it).

    >>> device_name("cuda:1"), device_name(" CPU ")
    ('cuda:1', 'cpu')
    >>> device_name("")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: unknown device ''; use auto, cpu, cuda, cuda:N or mps
    """
    name = text.strip().lower()
    if not _DEVICE.fullmatch(name):
        raise argparse.ArgumentTypeError(f"unknown device {_shown(text)}; use auto, cpu, cuda, cuda:N or mps")
    return name


def out_path(text: str) -> str:
    r"""Argument type ``--out``: a file name, not empty and without control characters (a name holding an ESC or
    a newline would be written, then printed back to the terminal); what is at the path is
    :func:`stitchcore.store.disk.out_file`'s to check.

    >>> out_path("report.html")
    'report.html'
    >>> out_path("r\x1b[2J.html")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: 'r\x1b[2J.html' has control characters: name a plain file, e.g. report.html
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: name the file to write, e.g. report.html")
    if safe(text) != text:
        raise argparse.ArgumentTypeError(f"{_shown(text)} has control characters: name a plain file, e.g. report.html")
    return text


def store_dir(text: str) -> str:
    """Argument type ``--store``: a folder name, not empty (``--store ""`` would quietly be the default store) and
    without control characters (a folder named with an ESC would be made).

    >>> store_dir("cache")
    'cache'
    >>> store_dir("")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: is empty: name the store's folder, or leave --store out for the default
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: name the store's folder, or leave --store out for the default")
    if safe(text) != text:
        raise argparse.ArgumentTypeError(f"{_shown(text)} has control characters: name a plain folder")
    return text


def in_file(path: str | Path, what: str, fix: str) -> Path:
    """``path`` (``~`` expanded, a link followed) when it is a regular file the CLI may read; else a
    StitchError naming what is there: a folder, a FIFO (a read would wait forever), a device such as
    ``/dev/zero`` (it never ends), a socket.  ``what`` names the file, ``fix`` says what to give instead.

    >>> in_file("/dev/zero", "bundle", "give a .zip made by `runs export`")
    Traceback (most recent call last):
    ...
    stitchcore.errors.StitchError: bundle /dev/zero is a device, not a file: give a .zip made by `runs export`
    """
    p = Path(path).expanduser()
    if not str(path).strip():
        raise StitchError(f"no {what} named: {fix}")
    try:
        mode = os.stat(p).st_mode  # through links: what a read would open
    except FileNotFoundError:
        raise StitchError(f"no {what} at {safe(str(p))}: {fix}") from None
    except OSError as exc:
        raise StitchError(f"cannot read {what} {safe(str(p))} ({exc.strerror or exc}): {fix}") from None
    if not stat.S_ISREG(mode):
        kind = ("a folder" if stat.S_ISDIR(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
        raise StitchError(f"{what} {safe(str(p))} is {kind}, not a file: {fix}")
    return p


def safe(text: str) -> str:
    r"""``text`` with every character a terminal would act on written as a visible escape: C0 and C1 controls
    (ESC, newlines, ``\r``, DEL), line and paragraph separators, and the bidi marks and overrides (U+202E
    turns what follows around).  Stored names (a bundle's label) and typed input echoed in an error go
    through it, so nothing printed can move the cursor, recolour the terminal or add a line.

    >>> safe("run\x1b[2J\nlabel\u202eTXT")
    'run\\x1b[2J\\nlabel\\u202eTXT'
    >>> safe("zoo:cnn-digits-s0 · 0.98")
    'zoo:cnn-digits-s0 · 0.98'
    """
    if text.isprintable():  # the common case: nothing to escape
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if ch in _NAMED:
            out.append(_NAMED[ch])
        elif code < 0x20 or 0x7F <= code <= 0x9F:
            out.append(f"\\x{code:02x}")
        elif code in _BIDI or unicodedata.category(ch) in ("Zl", "Zp"):
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def safe_text(text: str) -> str:
    r""":func:`safe` for a block of output: every line of ``text`` made safe, its line breaks kept.

    >>> print(safe_text("a\x1b[31m\nb"))
    a\x1b[31m
    b
    """
    return "\n".join(safe(line) for line in text.split("\n"))


def pair(text: str) -> tuple[int, int]:
    """Argument type ``X:Y``, two class indices.

    >>> pair("3:8")
    (3, 8)
    """
    try:
        x, y = text.split(":")
        return whole(x), whole(y)
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"expected X:Y (two class indices), got {_shown(text)}") from None


def json_obj(text: str) -> dict[str, Any]:
    """Argument type: a JSON object.

    >>> json_obj('{"blocks": [1, 1]}')
    {'blocks': [1, 1]}
    >>> json_obj("[1]")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected a JSON object, e.g. '{"width": 32}'
    """
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: '[' * 10**5
        raise argparse.ArgumentTypeError(f"not JSON ({getattr(exc, 'msg', 'nested too deep')}): {_shown(text)}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object, e.g. '{\"width\": 32}'")
    return value


def names(text: str | None) -> tuple[str, ...] | None:
    """Comma-separated names (cuts, metrics) as a tuple; None (or empty) stays None: "all" / the default.

    >>> names("block1, fc1,")
    ('block1', 'fc1')
    >>> names(None) is None
    True
    """
    return tuple(n.strip() for n in text.split(",") if n.strip()) if text else None
