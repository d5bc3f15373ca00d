"""Text a store row brings (from an imported bundle: run labels, errors, summary words, series names) is shown as
text wherever a page draws it: a label ``[x](http://evil/phish) ![i](http://evil/b.png)`` is no link and no image,
an error's ``<img>`` no image, and a figure's ``<a href=...>`` (plotly reads a few HTML tags in titles, legends
and hovers) no link.  ``ui.text`` does the escaping, in one place."""

from __future__ import annotations

import doctest
import json
import os
from pathlib import Path

import pytest

import ui
from stitchcore.store.results import Store
from tests.plain_text_helpers import LINK_OR_IMAGE, markdown_texts

EVIL = "[x](http://evil.example/phish) ![i](http://evil.example/b.png)"  # a link and an image from another host
HTML = "<a href='http://evil.example/phish'>y</a> <img src=http://evil.example/b.png>"
FAILED = "badbadbadbadbad0"  # a failed stitch whose label and error are EVIL and HTML
ZOO = "c0ffeec0ffeec0ff"  # a done zoo model whose summary's words are, its cluster parts failed with them


@pytest.fixture
def hostile(app):
    """The app over a store holding two rows as a hostile bundle would bring them (``runs import`` keeps any
    bounded string as a label, an error or a summary word)."""
    store = Store(Path(os.environ["STITCHLAB_STORE"]))
    store.begin(FAILED, "stitch", {"a": "zoo:cnn-digits-s0"}, label=f"{HTML} {EVIL}")
    store.log_metrics(FAILED, 1, {"loss": 1.0})
    store.log_metrics(FAILED, 2, {"loss": 0.5})
    store.fail(FAILED, f"{EVIL} {HTML}")
    store.begin(ZOO, "zoo", {"arch": "cnn"}, label=EVIL)
    store.log_metrics(ZOO, 1, {"loss": 2.0})
    store.log_metrics(ZOO, 2, {"loss": 1.0})
    store.finish(ZOO, {"ref": "zoo:evil-card", "arch": EVIL, "dataset": HTML, "accuracy": 0.9, "params": 10,
                       "sparsity": 0.0, "failed": {EVIL: HTML}, "backend": {"name": "ray", "address": EVIL},
                       "nodes": {"n1": {"host": HTML, "cells": 1}}})  # fmt: skip
    store.close()
    return app


def _open(at, page: str, **query: str):
    at = at.run().switch_page(f"views/{page}.py")
    at.query_params.update(query)
    return at.run()


def _no_link_or_image(at) -> list[str]:
    texts = markdown_texts(at)
    assert not at.exception, at.exception
    assert all(not LINK_OR_IMAGE.search(text) for text in texts), [t for t in texts if LINK_OR_IMAGE.search(t)]
    return texts


def test_a_failed_runs_label_and_error_are_text(hostile):
    at = _open(hostile, "results", run=FAILED)
    texts = _no_link_or_image(at)
    assert any("This run failed" in e.value for e in at.error)
    assert any("evil.example" in t for t in texts)  # the label and the error are shown, as text


def test_a_done_runs_summary_words_are_text(hostile):
    at = _open(hostile, "results", run=ZOO)
    texts = _no_link_or_image(at)
    assert any("of this run failed on the cluster" in w.value for w in at.warning)
    assert any("Model **`zoo:evil-card`**" in m.value for m in at.markdown)  # the zoo card, its words as text
    assert any("Computed on the Ray cluster" in t for t in texts)


def test_a_run_on_its_own_page_is_text(hostile):
    _no_link_or_image(_open(hostile, "stitch", run=FAILED))
    _no_link_or_image(_open(hostile, "models", run=ZOO))


def test_home_lists_a_bundles_labels_as_text(hostile):
    at = _open(hostile, "home")
    texts = _no_link_or_image(at)
    assert sum("evil.example" in t for t in texts) >= 1  # Recent runs: the failed stitch's label


def test_a_figure_of_bundle_labels_holds_no_link(hostile):
    """Compare two runs: the legend and the hover read the labels; plotly draws ``<a href>`` in them as a link,
    so the page's figure has ``&lt;a`` instead."""
    at = _open(hostile, "results")
    at.multiselect(key="results-pick").set_value([FAILED, ZOO]).run()
    assert not at.exception, at.exception
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    assert specs  # the comparison is drawn
    names = [trace.get("name", "") for spec in specs for trace in spec["data"]]
    assert any("&lt;a href" in name for name in names), names
    assert not any("<a " in json.dumps(spec) or "<img" in json.dumps(spec) for spec in specs)
    _no_link_or_image(at)


def test_the_ui_text_examples_run():
    """ui/ is not in pytest's doctest paths: its >>> examples run here."""
    import ui.figures
    import ui.text

    for module in (ui.text, ui.figures):
        assert doctest.testmod(module).failed == 0, module.__name__


@pytest.mark.parametrize("raw", [EVIL, HTML, "x\n# Moved\n- [here](http://evil.example)", "1. a", "www.evil.example",
                                 "`code` *b* _i_ ~s~ $x$ | a |", "a@evil.example"])
def test_plain_leaves_nothing_markdown_reads(raw):
    shown = ui.plain(raw)
    assert "\n" not in shown and not LINK_OR_IMAGE.search(shown)
    unescaped = shown.replace("\u2060", "")
    for ch in "[]!*_`#<>|~$":  # every Markdown character is escaped
        assert unescaped.count(ch) == unescaped.count("\\" + ch), (ch, shown)


def test_a_row_imported_with_an_impossible_time_opens_and_reports(hostile, tmp_path):
    """Rows imported before bundles were checked may hold ``created: -Infinity`` or 2**77: Results (the table and
    the open run) and ``runs report`` said OverflowError for every run; now the time is "unknown"."""
    import sqlite3

    from stitchcore.report.html import write_report

    root = Path(os.environ["STITCHLAB_STORE"])
    with sqlite3.connect(next(root.glob("*.sqlite"))) as db:
        db.execute("UPDATE runs SET created = ?, finished = ? WHERE id = ?", (float("-inf"), 2.0**77, ZOO))
    at = _open(hostile, "results", run=ZOO)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    with Store(root) as store:
        info = write_report(store, [ZOO], tmp_path / "r.html")
    assert "unknown date" in info.path.read_text()
