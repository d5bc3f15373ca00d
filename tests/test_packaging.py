"""``pip install .`` (issue 41, item 1): a wheel built from this checkout, installed with ``--no-deps`` into a fresh
virtual environment over the current one, gives the ``stitchlab`` command, the library and the app's files, and
knows nothing of the checkout it came from (its store is the user's cache, its app the wheel's copy)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Path]:
    """A venv (system site-packages visible: the dependencies) with the wheel installed; its paths."""
    base = tmp_path_factory.mktemp("packaging")
    wheels = base / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(wheels)], check=True, cwd=base, timeout=300)  # fmt: skip
    (wheel,) = wheels.glob("stitchlab-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, timeout=300)
    return {"wheel": wheel, "python": python, "bin": venv / "bin", "home": base / "home", "cwd": base}


def _run(installed: dict[str, Path], *argv: str) -> subprocess.CompletedProcess:
    """A command in the venv, from outside the checkout, with a home of its own and no store set."""
    env = {k: v for k, v in os.environ.items() if k not in ("STITCHLAB_STORE", "PYTHONPATH", "XDG_CACHE_HOME")}
    env.update(HOME=str(installed["home"]), PATH=f"{installed['bin']}{os.pathsep}{env.get('PATH', '')}")
    return subprocess.run(list(argv), capture_output=True, text=True, cwd=installed["cwd"], env=env, timeout=300)


def test_the_wheel_holds_the_library_the_lessons_and_the_app_under_one_name(installed):
    names = zipfile.ZipFile(installed["wheel"]).namelist()
    tops = {n.split("/")[0] for n in names if not n.startswith("stitchlab-")}
    assert tops == {"stitchcore", "stitchlab"}  # no top-level ui/ or views/ in site-packages
    for wanted in ("stitchcore/lessons/shipped/two-seeds.json", "stitchlab/webapp/app.py",
                   "stitchlab/webapp/.streamlit/config.toml", "stitchlab/webapp/views/run_views/matrix.py",
                   "stitchlab/webapp/ui/spec_form.py"):  # fmt: skip
        assert wanted in names, wanted
    assert not any("__pycache__" in n or n.startswith(("tests/", "bench/")) for n in names)


def test_the_stitchlab_command_runs_the_cli_and_finds_the_installed_app(installed):
    helped = _run(installed, "stitchlab", "--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: stitchlab ") and "lessons" in helped.stdout
    shown = _run(installed, "stitchlab", "app", "--print-only")
    assert shown.returncode == 0, shown.stderr
    app = Path(shown.stdout.split()[shown.stdout.split().index("run") + 1])
    assert app.name == "app.py" and app.parent.name == "webapp" and "site-packages" in app.parts
    assert ROOT not in app.parents
    listed = _run(installed, "stitchlab", "lessons", "list", "--json")  # the shipped lessons, read from the wheel
    assert listed.returncode == 0, listed.stderr
    assert "two-seeds" in listed.stdout
    assert (installed["home"] / ".cache" / "stitchlab" / "stitchlab.sqlite").is_file()  # the user's store


def test_the_installed_library_imports_from_the_venv_and_its_app_runs_its_pages(installed):
    probe = ("import stitchcore, pathlib, sys; from stitchcore.cli.app import app_script; "
             "from streamlit.testing.v1 import AppTest; "
             "print(stitchcore.__file__); print(app_script()); "
             "at = AppTest.from_file(str(app_script()), default_timeout=120).run(); "
             "print('exceptions', len(at.exception)); print('title', [t.value for t in at.title])")  # fmt: skip
    out = _run(installed, str(installed["python"]), "-c", probe)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert "site-packages" in lines[0] and str(ROOT) not in lines[0]
    assert lines[1].endswith("stitchlab/webapp/app.py")
    assert lines[2] == "exceptions 0"  # the app imports its own ui and views from the wheel's copy
    assert "StitchLab" in lines[3]
