"""The run-kind contract: every registered kind has every piece on every floor.

A kind registers itself in its own module (``stitchcore.experiments``: run, from_dict, check, backends,
estimate; the zoo also the models it makes) and exports the readers of its stored results; the
floors above keep one presentation table each, keyed by kind: its figures (``report.figures.FIGURES``),
its headline numbers (``report.summary.HEADLINES``), its view in the app (``views/run_views/``'s
``VIEWS``) and the page that launches and shows it (``ui/nav.py``).  Parametrized over
``list_experiments()`` (timm's ``tests/test_models.py`` habit), so a new kind that misses one fails here,
named, and a table that names a kind nobody registers fails too.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import ui
from stitchcore.experiments import get_experiment, list_experiments
from stitchcore.report.figures import FIGURES
from stitchcore.report.summary import HEADLINES

ROOT = Path(__file__).resolve().parents[1]
KINDS = list_experiments()


@pytest.fixture(scope="module")
def views() -> dict:
    """views/run_views/'s VIEWS (importing it draws nothing: no Streamlit script context needed)."""
    return importlib.import_module("views.run_views").VIEWS


def test_there_are_kinds_to_check():
    assert len(KINDS) >= 9, KINDS  # an empty registry would make every check below pass vacuously


@pytest.mark.parametrize("kind", KINDS)
def test_kind_has_an_estimator(kind):
    assert get_experiment(kind).estimate is not None, (
        f"run kind {kind!r} registers no estimator: give its Experiment an estimate= (experiments/estimate.py "
        "times the steps it scales)"
    )


@pytest.mark.parametrize("kind", KINDS)
def test_kind_has_figures(kind):
    assert kind in FIGURES, f"run kind {kind!r} has no figures: add it to stitchcore.report.figures.FIGURES"


@pytest.mark.parametrize("kind", KINDS)
def test_kind_has_a_headline(kind):
    assert kind in HEADLINES, f"run kind {kind!r} has no headline: add it to stitchcore.report.summary.HEADLINES"


@pytest.mark.parametrize("kind", KINDS)
def test_kind_has_a_run_view(kind, views):
    assert kind in views, f"run kind {kind!r} has no view: add it to VIEWS in views/run_views/__init__.py"
    assert callable(views[kind])


@pytest.mark.parametrize("kind", KINDS)
def test_kind_has_a_page(kind):
    url_path = ui.nav.PAGE_FOR_KIND.get(kind)
    assert url_path is not None, f"run kind {kind!r} has no page: name it in a PAGES row's kinds in ui/nav.py"
    (page,) = [p for p in ui.nav.PAGES if p.url_path == url_path]
    assert (ROOT / page.file).is_file(), f"run kind {kind!r}: its page {page.file} does not exist"
    assert ui.PAGE_TITLES[url_path] == page.title  # "Open on the <title> page" says the sidebar's title


def test_tables_name_only_registered_kinds(views):
    tables = {"FIGURES": FIGURES, "HEADLINES": HEADLINES, "VIEWS": views, "PAGE_FOR_KIND": ui.nav.PAGE_FOR_KIND}
    stale = {name: sorted(set(table) - set(KINDS)) for name, table in tables.items()}
    assert not any(stale.values()), f"tables name kinds no module registers: {stale}"


def test_nav_table_is_one_page_per_file():
    """app.py routes the PAGES rows; deep links and "Open on ..." go to views/<url_path>.py."""
    assert [p.default for p in ui.nav.PAGES].count(True) == 1
    assert len({p.url_path for p in ui.nav.PAGES}) == len(ui.nav.PAGES)
    for page in ui.nav.PAGES:
        assert page.file == f"views/{page.url_path}.py" and (ROOT / page.file).is_file(), page
        assert ui.nav.page_file(page.url_path) == page.file
