"""HTML reports (issue 13): ``runs report`` and ``stitchcore.report`` on a store with one run of every kind.

The report is one file that holds plotly.js once and loads nothing else; each run's section has its facts,
headline numbers and the figures its view draws, each with its numbers as CSV.  The browser check (it
renders offline) is ``tests/e2e/test_report_e2e.py``.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import stitchcore
from stitchcore.errors import StoreError
from stitchcore.plots.heatmap import heatmap_csv
from stitchcore.report import report_html, run_figures, write_report
from stitchcore.report.figures import figure_csv
from stitchcore.report.summary import headline, run_label, summary_row
from stitchcore.store.results import Store

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "store_v1"  # one run of every kind but lmstitch
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def store(tmp_path) -> Store:
    shutil.copytree(FIXTURE, tmp_path / "store")
    with Store(tmp_path / "store") as s:
        yield s


def _by_kind(store: Store) -> dict[str, str]:
    out: dict[str, str] = {}
    for rec in store.list_runs():
        out.setdefault(rec.kind, rec.id)
    return out


# the figures each kind's view draws, by file-name stem (the fixture's sweep has no simplicity metrics)
EXPECTED = {
    "zoo": ["training-curve"],
    "stitch": ["accuracy", "per-class", "training-curve"],
    "matrix": ["accuracy", "penalty"],
    "similarity": ["cka-linear", "cka-linear-baseline"],
    "sweep": ["traits", "penalty", "per-class"],
    "merge": ["loss"],
    "lmdepth": ["penalty-by-depth"],
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_each_kind_draws_its_views_figures_with_their_numbers(store, kind):
    rec = store.lookup(_by_kind(store)[kind])
    figs = run_figures(rec, store)
    assert [f.name for f in figs] == EXPECTED[kind]
    for f in figs:
        rows = list(csv.reader(io.StringIO(f.csv)))
        assert len(rows) >= 2, (f.name, f.csv)  # a header and at least one line of numbers
        assert f.title


def test_heat_map_csv_is_the_stored_matrix(store):
    rec = store.lookup(_by_kind(store)["matrix"])
    s = rec.summary
    accuracy = run_figures(rec, store)[0]
    assert accuracy.csv == heatmap_csv(s["values"], s["senders"], s["receivers"])
    sim = store.lookup(_by_kind(store)["similarity"])
    assert run_figures(sim, store)[0].csv == heatmap_csv(sim.summary["values"], sim.summary["senders"],
                                                          sim.summary["receivers"])  # fmt: skip


def test_stitch_csv_holds_the_headline_accuracies(store):
    rec = store.lookup(_by_kind(store)["stitch"])
    bars = {row["x"]: float(row["y"]) for row in csv.DictReader(io.StringIO(run_figures(rec, store)[0].csv))}
    assert bars["stitched"] == pytest.approx(rec.summary["accuracy"])
    assert bars["B"] == pytest.approx(rec.summary["base"]["b"])
    assert ("Stitched accuracy", f"{rec.summary['accuracy']:.1%}") in headline(rec)


def test_figure_csv_of_a_heat_map_names_rows_and_columns():
    from stitchcore.plots.heatmap import heatmap

    fig = heatmap([[0.5, None], [0.25, 1.0]], ["a1", "a2"], ["b1", "b2"], title="t")
    assert figure_csv(fig) == "sender (A) \\ receiver (B),b1,b2\na1,0.5,\na2,0.25,1.0\n"


def test_report_holds_every_run_with_plotly_once_and_nothing_to_fetch(store, tmp_path):
    ids = [rec.id for rec in store.list_runs()]
    info = write_report(store, ids, tmp_path / "out" / "all.html")
    text = info.path.read_text(encoding="utf-8")
    assert info.runs == len(ids) == 10 and info.bytes == info.path.stat().st_size
    assert info.figures == sum(len(EXPECTED[store.lookup(i).kind]) for i in ids) + 2  # + the comparison's two
    assert text.count("<div class='plot'") == info.figures
    assert text.count("plotly.js v") == 1  # the library, embedded once
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", text)  # no file the browser would fetch
    assert f"StitchLab {stitchcore.__version__}" in text
    assert "Comparison of 10 runs" in text
    for i in ids:
        rec = store.lookup(i)
        assert f"id='run-{i}'" in text and html.escape(json.dumps(rec.spec, indent=2, sort_keys=True)) in text
        assert html.escape(run_label(rec)) in text
    assert list(tmp_path.joinpath("out").iterdir()) == [info.path]  # no temporary file left


def test_one_run_has_no_comparison_and_its_samples(store):
    merge = store.lookup(_by_kind(store)["merge"])
    text = report_html(store, [merge.id])
    assert "Comparison of" not in text and "<h3>Samples</h3>" in text
    assert html.escape(merge.summary["prompt"]) in text


def test_unknown_or_unfinished_runs_are_refused(store):
    with pytest.raises(StoreError, match="unknown run id 'nope'"):
        report_html(store, ["nope"])
    rid = _by_kind(store)["stitch"]
    store.set_status(rid, "running")
    with pytest.raises(StoreError, match="running: report it once it has finished"):
        report_html(store, [rid])


def test_comparison_row_shows_numbers_not_grids(store):
    row = summary_row(store.lookup(_by_kind(store)["matrix"]))
    assert row[next(k for k in row if k.startswith("Penalty"))] is None  # the matrix's penalty is a grid
    lm = summary_row(store.lookup(_by_kind(store)["merge"]))
    assert lm["Model A"].startswith("loss ")


def test_penalties_read_in_one_unit_and_direction_in_headlines_rows_and_report(store):
    """The old store's numbers (fractions, each paper's sign) read as the app shows them: the image penalty in
    points and the LM loss penalty in % of the base loss, both higher = worse; the stored values stay as they were."""
    from stitchcore.report.summary import table_numbers

    stitch, merge = store.lookup(_by_kind(store)["stitch"]), store.lookup(_by_kind(store)["merge"])
    assert stitch.summary["penalty"] == -0.04 and merge.summary["loss_penalty"] == -0.012898  # as stored in v1
    assert dict(headline(stitch))["Penalty (B − stitched)"] == "−4.0 pts"
    assert summary_row(stitch)["Penalty = B − stitched (pts, higher = worse)"] == "−4.0 pts"
    assert table_numbers(stitch)["penalty_pts"] == -4.0
    # the merge's loss is 1.3% above its base's: the paper's −0.0129, shown +1.3 % (higher = worse)
    assert dict(headline(merge))["Loss penalty (base A)"] == "+1.3 %"
    row = summary_row(merge)
    assert row["Loss penalty = (L − L_base) / L_base (% of base loss, higher = worse)"] == "+1.3 %"
    assert table_numbers(merge)["penalty_pts"] is None and table_numbers(merge)["loss_penalty_pct"] == 1.2898
    text = report_html(store, [merge.id])
    assert "loss_penalty = (L_base - L) / L_base; negative = worse" not in text  # the stored note, paper's sign
    assert "above 0: a higher loss than the base model" in html.unescape(text)


def test_metrics_csv_writes_lm_penalties_as_shown(store):
    from stitchcore.report.figures import metrics_csv

    rid = _by_kind(store)["lmdepth"]
    series = store.series(rid)
    stored = next(name for name in series if name.startswith("penalty:"))
    rows = list(csv.reader(io.StringIO(metrics_csv(series))))
    assert rows[0] == ["metric", "step", "value"]
    shown = [r for r in rows[1:] if r[0] == stored.replace("penalty:", "loss_penalty_pct:")]
    assert [float(r[2]) for r in shown] == [pytest.approx(-100 * v) for _, v in series[stored]]
    assert not any(r[0].startswith("penalty:") for r in rows)
def test_time_reads_in_minutes_and_hours_in_headlines_and_comparisons():
    from stitchcore.store.results import RunRecord

    rec = RunRecord("0" * 16, "zoo", {}, "done", {"accuracy": 0.9, "seconds": 1944.9}, None, 0.0, None, None, "z")
    assert ("Time", "32 min 25 s") in headline(rec)
    assert summary_row(rec)["Time"] == "32 min 25 s"
    rec = RunRecord("1" * 16, "zoo", {}, "done", {"seconds": 3720.2}, None, 0.0, None, None, "z")
    assert ("Time", "1 h 02 min") in headline(rec) and summary_row(rec)["Time"] == "1 h 02 min"


def test_cli_runs_report(store, tmp_path):
    ids = [_by_kind(store)["stitch"], _by_kind(store)["sweep"]]  # only the stitch has curves: no comparison plot
    out = tmp_path / "r.html"
    cmd = [sys.executable, "-m", "stitchcore", "runs", "report", *ids, "--out", str(out), "--store", str(store.root)]
    done = subprocess.run([*cmd, "--json"], capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    obj = json.loads(done.stdout)
    assert obj["runs"] == 2 and obj["figures"] == 3 + 3 and obj["bytes"] == out.stat().st_size
    bad = subprocess.run([*cmd[:5], "nope", "--out", str(tmp_path / "x.html"), "--store", str(store.root)],
                         capture_output=True, text=True, cwd=REPO, timeout=120, check=False)  # fmt: skip
    assert bad.returncode != 0 and "unknown run id 'nope'" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "x.html").exists()


def test_a_label_with_html_is_drawn_as_text_in_the_report_s_figures():
    """A bundle's run label reading ``<a href=...>`` reaches a figure's ticks or legend: the offline report holds
    it to plotly's harmless tags (``&lt;a``), as the app's pages do, so it is never a link in the file."""
    import plotly.graph_objects as go

    from stitchcore.report.figures import RunFigure
    from stitchcore.report.html import _Figures

    evil = "<a href='http://evil.example/phish'>run</a><img src='http://evil.example/b.png'>"
    fig = go.Figure(go.Bar(x=[evil], y=[1], name=evil), layout_title_text="accuracy<br><b>ok</b>")
    out = _Figures().render(RunFigure("accuracy", "accuracy", fig, "x,y\n"), "stem")
    drawn = json.loads(re.search(r"<script type='application/json' id='fig1-json'>(.*?)</script>", out).group(1))
    texts = json.dumps(drawn)  # what plotly.js reads once the browser parses the JSON
    assert "<a " not in texts and "<img" not in texts, texts
    assert drawn["data"][0]["x"] == ["&lt;a href='http://evil.example/phish'>run&lt;/a>&lt;img src='http://evil.example/b.png'>"]
    assert drawn["layout"]["title"]["text"] == "accuracy<br><b>ok</b>"  # the house tags stay
