"""The web app's files into the wheel: ``app.py``, ``ui/``, ``views/`` and ``.streamlit/config.toml`` go to
``stitchlab/webapp/``, the folder ``stitchlab app`` runs Streamlit in (``stitchcore.cli.app.app_script``).

They stay out of the top level of ``site-packages`` (no packages named ``ui`` or ``views`` there): Streamlit puts
the folder of the script it runs first on ``sys.path``, so ``import ui`` in the app finds these copies.  Everything
else is declared in ``pyproject.toml``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
WEBAPP_FILES = ("app.py", ".streamlit/config.toml")
WEBAPP_PACKAGES = ("ui", "views")
INIT = '"""The StitchLab web app as a wheel installs it: ``webapp/app.py`` is what ``stitchlab app`` runs."""\n'


class BuildWithWebapp(build_py):
    """``build_py``, then the app's files copied under ``stitchlab/webapp`` of the build."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "stitchlab"
        webapp = target / "webapp"
        shutil.rmtree(target, ignore_errors=True)
        webapp.mkdir(parents=True)
        (target / "__init__.py").write_text(INIT)
        for name in WEBAPP_FILES:
            (webapp / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, webapp / name)
        for package in WEBAPP_PACKAGES:
            shutil.copytree(ROOT / package, webapp / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithWebapp})
