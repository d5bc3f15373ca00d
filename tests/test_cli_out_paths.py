"""What the CLI reads and writes by name, and what it prints of stored text (issue 45, items 4 and 7).

A FIFO, a device or a link where ``--out`` points is refused before anything is opened; a FIFO or a device
given as a file to read (a checkpoint, a bundle) is refused before it is opened, never read forever; and a
stored name (a bundle's label) is printed with its control characters escaped, one run per line.
The refusals themselves are rows of tests/test_cli_bad_inputs.py (with what is at the path checked
unchanged); here: a real process (a hang is a failure, not a stuck suite) and the stored-text side.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from stitchcore.store.results import Store
from tests.conftest import copy_store, run_cli

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = "zoo:x\x1b[2J\x1b]0;pwned\x07\nFAKE  stitch  done  row\r\u202eTXT\x9b31m"


@pytest.fixture
def store(trained_store, tmp_path) -> Store:
    """A copy of the session store whose newest run carries a label a hostile bundle could bring."""
    src, _ = trained_store
    copy_store(src.root, tmp_path / "store")
    with contextlib.closing(sqlite3.connect(tmp_path / "store" / "stitchlab.sqlite")) as db, db:
        newest = db.execute("SELECT id FROM runs ORDER BY created DESC, rowid DESC LIMIT 1").fetchone()[0]
        db.execute("UPDATE runs SET label = ? WHERE id = ?", (HOSTILE, newest))
    opened = Store(tmp_path / "store")
    yield opened
    opened.close()


def cli(argv: list[str], store: Store, capsys) -> tuple[int, str, str]:
    return run_cli(argv, store.root, capsys)


def test_runs_list_prints_a_stored_label_escaped_one_run_per_line(store, capsys):
    code, out, err = cli(["runs", "list", "--limit", "10000"], store, capsys)  # the session store may hold > 50
    runs = store.list_runs(limit=10000)
    lines = out.splitlines()
    assert code == 0 and err == ""
    assert len(lines) == len(runs), out  # the label's newline adds no line
    assert all(line.isprintable() for line in lines), out  # no ESC, BEL, CR, CSI or U+202E reaches the terminal
    assert r"zoo:x\x1b[2J\x1b]0;pwned\x07\nFAKE  stitch  done  row\r\u202eTXT\x9b31m" in lines[0]


def test_runs_show_and_json_output_escape_it_too(store, capsys):
    newest = store.list_runs()[0].id
    for argv in (["runs", "show", newest], ["runs", "list", "--json"], ["runs", "show", newest, "--json"]):
        code, out, _ = cli(argv, store, capsys)
        assert code == 0 and all(line.isprintable() for line in out.splitlines()), (argv, out)


def run_process(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """``python -m stitchcore argv`` with a deadline: a CLI that opens a FIFO waits forever, and fails here."""
    env = {**os.environ, "STITCHLAB_STORE": str(tmp_path / "store")}
    return subprocess.run([sys.executable, "-m", "stitchcore", *argv, "--quiet"], capture_output=True, text=True,
                          env=env, timeout=90, cwd=ROOT, check=False)  # fmt: skip


def one_line(p: subprocess.CompletedProcess, fix: str) -> None:
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2 and p.stdout == "" and len(lines) == 1 and fix in lines[0], p.stderr


def test_a_checkpoint_that_is_a_fifo_is_refused_not_read_forever(tmp_path):
    """A real process: the CLI as it was opened the FIFO and waited for a writer forever (here: the deadline)."""
    os.mkfifo(tmp_path / "model.pt")
    one_line(run_process(["cuts", f"file:{tmp_path}/model.pt?arch=zoo:cnn"], tmp_path), "is a FIFO, not a file")
    assert (tmp_path / "model.pt").is_fifo()
