"""The HTML report (issue 13) in Chromium with the network off: every figure renders from the one file, nothing
is fetched, and a figure's toolbar saves SVG and PNG, its link the CSV.

The report covers every run of the old fixture store (one run of each kind but lmstitch), as
``python -m stitchcore runs report ID... --out FILE.html`` writes it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from stitchcore.report import write_report
from stitchcore.store.results import Store

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "store_v1"


def test_report_renders_offline_and_saves_figures(browser, tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "store")
    with Store(tmp_path / "store") as store:
        info = write_report(store, [r.id for r in store.list_runs()], tmp_path / "report.html")
    context = browser.new_context(viewport={"width": 1300, "height": 900}, offline=True, accept_downloads=True)
    fetched, errors = [], []
    context.on("request", lambda r: fetched.append(r.url))
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(info.path.as_uri())
    page.wait_for_function(  # each plot div holds plotly's drawing once rendered
        "n => document.querySelectorAll('div.plot .main-svg').length >= n", arg=info.figures, timeout=120_000)
    assert page.locator("div.plot").count() == info.figures == 18
    assert page.locator("div.plot .hoverlayer").count() >= info.figures  # interactive: hover layers are drawn
    assert errors == [], errors
    assert page.locator("[data-title='Share chart...']").count() == 0  # no button that uploads to a cloud
    assert [u for u in fetched if not u.startswith(("file:", "data:"))] == []  # nothing left the machine
    shots = os.environ.get("STITCHLAB_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(shots) / "report.png"), full_page=True)

    stitch = page.locator("h2", has_text="[block2] -> ").first  # the stitch run's section
    figure = stitch.locator("xpath=following::div[@class='fig'][1]")
    figure.hover()
    with page.expect_download() as svg:
        figure.locator("[data-title='Download plot as SVG']").click()
    assert svg.value.suggested_filename.endswith("-accuracy.svg")
    assert svg.value.path().read_text(encoding="utf-8").lstrip().startswith("<svg")
    with page.expect_download() as png:
        figure.locator("[data-title='Download plot as a PNG']").click()
    assert png.value.path().read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with page.expect_download() as csv:
        figure.get_by_text("CSV: Stitched vs base accuracy").click()
    assert csv.value.path().read_text(encoding="utf-8").startswith("trace,x,y\n")
    context.close()
