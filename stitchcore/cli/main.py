"""``python -m stitchcore``: the same experiments and store as the app, from a shell.

``--json`` prints exactly one JSON object on stdout; progress goes to stderr;
bad input exits 2 with a one-line ``error: ...`` naming the fix.

This module only assembles the verb modules (each has ``add_verbs`` and ``COMMANDS``)
into one parser and one command table, and runs a command.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

from stitchcore.cli import app, assemble, lessons, lm, matrix, models, runs, stitch, sweep, transfer
from stitchcore.cli._args import safe
from stitchcore.cli._common import CTRL_C, Command, OneLineParser, ProgressBar, common_parser
from stitchcore.errors import Cancelled, RunBusy, StitchError

__all__ = ["COMMANDS", "build_parser", "main", "program_name"]

_VERB_MODULES = (models, stitch, matrix, assemble, lm, sweep, transfer, runs, lessons, app)  # the order of the verbs in --help


def build_parser() -> argparse.ArgumentParser:
    """The CLI's parser: every verb of every verb module, each with the common flags.

    >>> build_parser().parse_args(["runs", "show", "ab12"]).runs_verb
    'show'
    """
    common = common_parser()
    p = OneLineParser(prog=program_name(), description="Model stitching from the shell.")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    for module in _VERB_MODULES:
        module.add_verbs(verbs, common)
    return p


def program_name() -> str:
    """How the user called the CLI: ``stitchlab`` (the command a pip install makes), else ``python -m stitchcore``."""
    return "stitchlab" if os.path.basename(sys.argv[0]) in ("stitchlab", "stitchlab.exe") else "python -m stitchcore"


COMMANDS: dict[tuple[str, str | None], Command] = {k: v for m in _VERB_MODULES for k, v in m.COMMANDS.items()}
COMMANDS[("stitch", None)] = lm.lm_aware_stitch(stitch.COMMANDS[("stitch", None)])  # LM refs -> lmstitch


LOGS_RUNS = {("zoo", "train"), *((v, None) for v in ("stitch", "matrix", "similarity", "sweep", "assemble", "merge", "lmstitch", "transfer"))}

_CTRL_C_LINE = "cancelled (Ctrl-C): a run in progress is stored as cancelled; the same command starts it again"


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code (0 ok, 1 bug or failed check, 2 bad input, 3 the run is
    running elsewhere and --no-wait, 130 cancelled with Ctrl-C)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    args = build_parser().parse_args(argv)
    CTRL_C.clear()
    handler = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_ctrl_c)
    try:
        return _main(args)
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, handler)


def _on_ctrl_c(signum: int, frame: object) -> None:
    """SIGINT: flag the runs to stop at their next step (CTRL_C), then interrupt as Python does."""
    CTRL_C.ctrl_c()
    raise KeyboardInterrupt


def _main(args: argparse.Namespace) -> int:
    sub = getattr(args, f"{args.verb}_verb", None)  # a verb group (zoo, runs) keeps its sub-verb there
    bar = ProgressBar("never" if args.quiet else "always" if args.progress else "auto")
    try:
        from stitchcore.store.results import Store

        if args.log_to is not None and (args.verb, sub) not in LOGS_RUNS:  # never a flag quietly ignored
            raise StitchError("--log-to logs the run a verb makes: use it with zoo train, stitch, matrix, similarity, "
                              "sweep, assemble or merge")  # fmt: skip
        store = Store(args.store)
        if (args.verb, sub) != ("runs", "check"):  # check reads a damaged store as it is
            store.mark_interrupted()  # runs left by dead processes; live ones are left alone
        code = COMMANDS[(args.verb, sub)](args, store, bar)  # None: success; a verb may return 1 (runs check)
        if store.stale:  # read-only, and a live writer's latest commits could not be read
            print(f"note: {safe(str(store.stale))}", file=sys.stderr)
    except Cancelled as exc:  # `runs cancel` from another process, the app's Stop, or a Ctrl-C seen by a run
        bar.close()
        if CTRL_C.by_ctrl_c:
            print(_CTRL_C_LINE, file=sys.stderr)
        else:
            print(f"cancelled: {safe(str(exc))}", file=sys.stderr)
        return 130
    except RunBusy as exc:
        bar.close()
        print(f"error: {safe(str(exc))}", file=sys.stderr)
        return 3
    except StitchError as exc:  # one line whatever it echoes: a typed ref or a stored label may hold ESC or \n
        bar.close()
        print(f"error: {safe(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        bar.close()
        print(_CTRL_C_LINE, file=sys.stderr)
        return 130
    except BrokenPipeError:  # the output went to a reader that stopped reading (`| head`): leave quietly
        _quiet_stdout()
        return 141  # 128 + SIGPIPE, as a shell tool cut off the same way
    return code or 0


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush of the closed pipe raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no real file (a test's capture): nothing will flush into a pipe
        pass
