"""One self-contained HTML file for one or more stored runs: opens offline, interactive, printable.

plotly.js is embedded once (no request to any network address); each figure is its JSON and a
``Plotly.newPlot`` call, with a CSV link of its numbers (a ``data:`` URI) and a toolbar that saves PNG
(3x the drawn size) and SVG.  Each run gets its title, its facts (models, cuts, data, preprocessing),
its headline numbers, the figures its view in the app draws (:func:`~stitchcore.report.figures.run_figures`),
language-model samples, and its spec; several runs also get a comparison section first.

>>> from stitchcore.store.results import Store
>>> import tempfile
>>> text = report_html(Store(tempfile.mkdtemp()), [])
Traceback (most recent call last):
...
stitchcore.errors.StoreError: no runs to report: name run ids (see `python -m stitchcore runs list`)
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
import urllib.parse
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plotly.offline import get_plotlyjs

import stitchcore
from stitchcore.errors import StoreError
from stitchcore.plots import lm as plots_lm
from stitchcore.plots.safe_text import safe_figure
from stitchcore.report.figures import RunFigure, compare_figures, run_figures
from stitchcore.report.summary import facts, headline, run_label, summary_row
from stitchcore.store.bundle import resolve_runs
from stitchcore.store.disk import out_file
from stitchcore.store.records import RunRecord
from stitchcore.store.results import Store
from stitchcore.timewords import usable_time

__all__ = ["Chapter", "ReportInfo", "markdown_html", "report_html", "write_report"]

PRINT_SCALE = 3  # PNG exports: 3x the drawn size (a 700 px wide figure saves 2100 px: 300 dpi at 7 in)

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1180px;
 padding:24px;color:#1f2430;line-height:1.45}
h1{margin:0 0 4px}h2{margin-top:40px;border-top:2px solid #e5e7eb;padding-top:20px}
.meta{color:#5b6170;font-size:14px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.card{border:1px solid #e5e7eb;border-radius:8px;padding:8px 14px;min-width:120px}
.card .k{font-size:12px;color:#5b6170}.card .v{font-size:22px;font-weight:600}
table{border-collapse:collapse;font-size:14px;margin:8px 0}
td,th{border-bottom:1px solid #e5e7eb;padding:4px 10px;text-align:left;vertical-align:top}
.figs{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:16px}
.fig{border:1px solid #eef0f3;border-radius:8px;padding:6px}
.fig .plot{min-height:420px}.fig .under{font-size:13px;color:#5b6170;padding:2px 6px}
pre{background:#f6f7f9;padding:10px;border-radius:6px;overflow:auto;font-size:12px;white-space:pre-wrap}
a{color:#2563eb}.error{color:#b42318}
@media print{.figs{display:block}.fig{break-inside:avoid;margin-bottom:12px}}
"""

# Draws every figure from its JSON once plotly.js has loaded; the toolbar gets an SVG button beside PNG.
_DRAW = """
(function(){
  var svg = {name: "Download plot as SVG", icon: Plotly.Icons.disk, click: function(gd){
    Plotly.downloadImage(gd, {format: "svg", filename: gd.dataset.file});}};
  document.querySelectorAll("div.plot").forEach(function(div){
    var fig = JSON.parse(document.getElementById(div.id + "-json").textContent);
    Plotly.newPlot(div, fig.data, fig.layout, {responsive: true, displaylogo: false, showSendToCloud: false,
      modeBarButtonsToAdd: [svg],
      toImageButtonOptions: {format: "png", scale: %d, filename: div.dataset.file}});
  });
})();
""" % PRINT_SCALE


@dataclass(frozen=True)
class ReportInfo:
    """What :func:`write_report` wrote."""

    path: Path
    bytes: int
    runs: int
    figures: int


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "figure"


class _Figures:
    """Numbers the figures of one report and renders each as a plot div, its JSON and its CSV link."""

    def __init__(self) -> None:
        self.count = 0

    def render(self, fig: RunFigure, stem: str) -> str:
        self.count += 1
        div = f"fig{self.count}"
        file = _slug(f"{stem}-{fig.name}")
        data = safe_figure(fig.figure).to_json().replace("</", "<\\/")  # inside <script>: no closing tag
        csv = "data:text/csv;charset=utf-8," + urllib.parse.quote(fig.csv)
        caption = f"<div class='under'>{_e(fig.caption)}</div>" if fig.caption else ""
        return (f"<div class='fig'><div class='plot' id='{div}' data-file='{_e(file)}'></div>"
                f"<script type='application/json' id='{div}-json'>{data}</script>{caption}"
                f"<div class='under'><a download='{_e(file)}.csv' href='{_e(csv)}'>CSV: {_e(fig.title)}</a>"
                " · the toolbar saves PNG and SVG</div></div>")  # fmt: skip


def _cards(pairs: Sequence[tuple[str, str]]) -> str:
    return "<div class='cards'>" + "".join(
        f"<div class='card'><div class='k'>{_e(k)}</div><div class='v'>{_e(v)}</div></div>" for k, v in pairs
    ) + "</div>"  # fmt: skip


def _table(pairs: Sequence[tuple[str, str]]) -> str:
    return "<table>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in pairs) + "</table>"


def _comparison(records: Sequence[RunRecord], store: Store, figures: _Figures) -> str:
    rows = [summary_row(r) for r in records]
    cols = [c for c in rows[0] if any(row.get(c) not in (None, "") for row in rows)]
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{_e('' if r.get(c) is None else r[c])}</td>" for c in cols) + "</tr>"
                   for r in rows)  # fmt: skip
    labelled = [(f"{run_label(r)} · {r.id[:6]}", r) for r in records]
    figs = "".join(figures.render(f, "compare") for f in compare_figures(labelled, store))
    return (f"<h2 id='compare'>Comparison of {len(records)} runs</h2><table><tr>{head}</tr>{body}</table>"
            + (f"<div class='figs'>{figs}</div>" if figs else ""))  # fmt: skip


def _samples(summary: dict) -> str:
    samples = summary.get("samples") or {}
    if not samples:
        return ""
    items = "".join(f"<h4>{_e({'a': 'Model A', 'b': 'Model B'}.get(k, k))}</h4><pre>{_e(v)}</pre>"
                    for k, v in samples.items())  # fmt: skip
    return (f"<h3>Samples</h3><p>Each model continues the same prompt (seed and temperature fixed):</p>"
            f"<pre>{_e(summary.get('prompt', ''))}</pre>{items}")


_INLINE = ((re.compile(r"`([^`]+)`"), r"<code>\1</code>"), (re.compile(r"\*\*([^*]+)\*\*"), r"<strong>\1</strong>"),
           (re.compile(r"(?<![*\w])\*([^*]+)\*(?![*\w])"), r"<em>\1</em>"))  # fmt: skip


def markdown_html(text: str) -> str:
    """A lesson's Markdown as HTML, enough for its text: paragraphs, line breaks, **bold**, *italic*, `code`
    (everything escaped first: no HTML of the text's own reaches the page).

    >>> markdown_html("A **bold** <b>claim</b>.\\n\\n*Why?*")
    '<p>A <strong>bold</strong> &lt;b&gt;claim&lt;/b&gt;.</p><p><em>Why?</em></p>'
    """
    paragraphs = []
    for block in re.split(r"\n\s*\n", text.strip()):
        if not block.strip():
            continue
        html_text = _e(block)
        for pattern, repl in _INLINE:
            html_text = pattern.sub(repl, html_text)
        paragraphs.append("<p>" + html_text.replace("\n", "<br>") + "</p>")
    return "".join(paragraphs)


def _run_section(rec: RunRecord, store: Store, figures: _Figures) -> str:
    stamp = usable_time(rec.finished) or usable_time(rec.created)  # an old import may hold -Infinity
    when = dt.datetime.fromtimestamp(stamp, dt.UTC).strftime("%Y-%m-%d %H:%M UTC") if stamp else "unknown date"
    parts = [f"<h2 id='run-{rec.id}'>{_e(run_label(rec))}</h2>",
             f"<div class='meta'>{_e(rec.kind)} run <code>{rec.id}</code> · {_e(rec.status)} · {when}</div>"]
    if rec.error:
        parts.append(f"<p class='error'>{_e(rec.error)}</p>")
    parts.append(_cards(headline(rec)))
    parts.append(_table(facts(rec)))
    figs = run_figures(rec, store)
    if figs:
        parts.append("<div class='figs'>" + "".join(figures.render(f, rec.id) for f in figs) + "</div>")
    # the LM runs' stored "penalty_sign" says the paper's sign; the report shows the app's (higher = worse)
    notes = ([f"Loss penalty: {plots_lm.SIGN_NOTE}."] if "penalty_sign" in rec.summary else [])
    notes += [rec.summary["control_note"]] if rec.summary.get("control_note") else []
    parts += [f"<p class='meta'>{_e(n)}</p>" for n in notes]
    skipped = rec.summary.get("skipped") or {}
    if isinstance(skipped, dict) and skipped:
        parts.append(_table([(k, v) for k, v in skipped.items()]).replace("<table>", "<h3>Skipped</h3><table>", 1))
    parts.append(_samples(rec.summary))
    spec = json.dumps(rec.spec, indent=2, sort_keys=True)
    parts.append(f"<details><summary>Spec (the run id is its hash)</summary><pre>{_e(spec)}</pre></details>")
    return "\n".join(parts)


@dataclass(frozen=True)
class Chapter:
    """Text before a run's section (a lesson's step): a heading and Markdown (:func:`markdown_html`)."""

    heading: str
    text: str


def report_html(store: Store, run_ids: Sequence[str], *, created: dt.datetime | None = None, title: str | None = None,
                intro: str = "", chapters: Sequence[Chapter] | None = None) -> str:
    """The report of ``run_ids`` (run ids or ``zoo:NAME``, in that order) as one HTML document; raises
    ``StoreError`` for an unknown or unfinished run.

    ``title``, ``intro`` (Markdown) and ``chapters`` (one per run, in order: a lesson's steps) make it a
    lesson's handout: each run follows its chapter, and no comparison table comes first.
    """
    return _build(store, run_ids, created, title=title, intro=intro, chapters=chapters)[0]


def _build(store: Store, run_ids: Sequence[str], created: dt.datetime | None, *, title: str | None = None,
           intro: str = "", chapters: Sequence[Chapter] | None = None) -> tuple[str, int, int]:
    """The document, how many runs it holds and how many figures it draws."""
    records = resolve_runs(store, run_ids, verb="report")
    if chapters is not None and len(chapters) != len(records):
        raise ValueError(f"{len(chapters)} chapters for {len(records)} runs: give one per run")
    created = created or dt.datetime.now(dt.UTC)
    figures = _Figures()
    title = title or (run_label(records[0]) if len(records) == 1 else f"{len(records)} StitchLab runs")
    body = [markdown_html(intro)] if intro else []
    if chapters is not None:
        toc = "".join(f"<li><a href='#run-{r.id}'>{_e(c.heading)}</a></li>" for r, c in zip(records, chapters))
        body.append(f"<ol>{toc}</ol>")
        for rec, chapter in zip(records, chapters, strict=True):
            body += [f"<h2>{_e(chapter.heading)}</h2>", markdown_html(chapter.text),
                     _run_section(rec, store, figures).replace("<h2 ", "<h3 ", 1).replace("</h2>", "</h3>", 1)]
    elif len(records) > 1:
        toc = "".join(f"<li><a href='#run-{r.id}'>{_e(run_label(r))}</a> <code>{r.id}</code></li>" for r in records)
        body += [f"<ol>{toc}</ol>", _comparison(records, store, figures)]
    if chapters is None:
        body += [_run_section(r, store, figures) for r in records]
    stamp = f"StitchLab {stitchcore.__version__} · made {created.strftime('%Y-%m-%d %H:%M UTC')}"
    text = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='generator' content='StitchLab {_e(stitchcore.__version__)}'><title>{_e(title)}</title>"
        f"<style>{_CSS}</style><script>{get_plotlyjs()}</script></head><body>"
        f"<h1>{_e(title)}</h1><div class='meta'>{_e(stamp)} · {len(records)} run(s) · opens offline</div>"
        + "\n".join(body)
        + f"<p class='meta'>{_e(stamp)}</p><script>{_DRAW}</script></body></html>"
    )  # fmt: skip
    return text, len(records), figures.count


def write_report(store: Store, run_ids: Sequence[str], out: str | Path, *, title: str | None = None,
                 intro: str = "", chapters: Sequence[Chapter] | None = None) -> ReportInfo:
    """Write :func:`report_html` (with its ``title``, ``intro`` and ``chapters``) to ``out`` atomically (a
    temporary file renamed over it); a folder or an unwritable place is a ``StoreError``."""
    path = out_file(out, "report.html")
    text, runs, count = _build(store, run_ids, None, title=title, intro=intro, chapters=chapters)
    tmp = path.with_name(f".tmp-{uuid.uuid4().hex}-{path.name}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise StoreError(f"cannot write {path} ({exc}): pass another --out") from exc
    finally:
        tmp.unlink(missing_ok=True)  # gone after the rename; a half-written file otherwise
    return ReportInfo(path, path.stat().st_size, runs, count)
