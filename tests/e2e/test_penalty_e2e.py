"""One stitch's penalty reads the same in the browser wherever it appears: in a matrix's heat map (its cell's
text, hover and colour bar), on the Stitch card of that cell opened by its link, and on Results (the table's
CSV and the run's view): the same number, the same unit (percentage points), the same sign (higher = worse).

The run is made the same on both sides: a closed-form matrix cell is a least-squares adapter that is never
trained, so the cell opened on the Stitch page with ``epochs=0`` is that very stitch (checked to the last digit
against the stored numbers below, not assumed).
"""

from __future__ import annotations

import csv
import io
import re
from urllib.parse import parse_qs, urlencode, urlparse

import pytest

from tests.e2e.conftest import download, open_app

SENDERS = RECEIVERS = ("block2", "fc1", "fc2")
CELL = ("fc1", "fc2")  # row fc1, column fc2 of the matrix: stored penalty 0.006667 with the default digit CNNs


@pytest.fixture(scope="module")
def matrix_run(e2e_store):
    """Two digit CNNs trained in the e2e server's store, and a closed-form 3 x 3 matrix of them."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.matrix import MatrixSpec
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.store.results import Store

    store = Store(e2e_store)
    refs = [run_experiment("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=s), store).record.summary["ref"]
            for s in (0, 1)]  # fmt: skip
    return run_experiment("matrix", MatrixSpec(refs[0], refs[1], senders=SENDERS, receivers=RECEIVERS), store).record


def _card(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]', has_text=label).first
    box.wait_for(timeout=180_000)
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()


def _plain(text: str) -> str:
    """Text as read: tags gone, the minus sign and the hyphen the same character."""
    return re.sub("<[^>]+>", "", text).replace("−", "-").strip()


def test_a_stitch_penalty_reads_the_same_on_heat_map_stitch_card_and_results(app_url, e2e_store, page, matrix_run,
                                                                               tmp_path):  # fmt: skip
    from stitchcore.experiments import spec_from_record
    from stitchcore.experiments.matrix import matrix_state
    from stitchcore.plots.penalty import format_pts, penalty_pts
    from stitchcore.store.results import Store

    store = Store(e2e_store)

    # -- the matrix's penalty panel: its cell, its hover, its colour bar ---------------------------------------
    open_app(page, f"{app_url}/similarity?run={matrix_run.id}")
    page.locator(".js-plotly-plot", has_text="Stitching accuracy").first.wait_for(timeout=60_000)
    page.get_by_text("penalty", exact=True).first.click()  # the "Stitching panel shows" radio
    chart = page.locator(".js-plotly-plot", has_text="Stitching penalty").first
    chart.wait_for(timeout=60_000)
    page.get_by_text("Click a cell of the stitching panel").wait_for(timeout=60_000)
    fig = chart.evaluate("el => ({data: el.data.map(t => ({name: t.name, z: t.z, customdata: t.customdata,"
                         " texttemplate: t.texttemplate, bar: t.colorbar && t.colorbar.title.text})),"
                         " title: el.layout.title.text})")  # fmt: skip
    values = next(t for t in fig["data"] if t["name"] == "values")
    row, col = SENDERS.index(CELL[0]), RECEIVERS.index(CELL[1])
    assert values["customdata"][row][col][:2] == list(CELL)
    assert "95% interval over the test images" in values["customdata"][row][col][2]  # and the cell's interval
    cell_pts = values["z"][row][col]
    assert values["texttemplate"] == "%{z:+.1f}"
    assert _plain(values["bar"]) == "penalty(pts, higher = worse)"
    assert _plain(fig["title"]) == "Stitching penalty = B - stitched (pts, higher = worse)"
    state = matrix_state(store, matrix_run.id, matrix_run.summary, spec_from_record(matrix_run), status="done",
                         final=True)  # fmt: skip
    stored = state.grid("penalty")[row][col]
    assert cell_pts == pytest.approx(100 * stored) and stored > 0  # drawn in points, the stored fraction's sign
    cell_text = format_pts(cell_pts)  # "+0.7 pts"
    printed = [_plain(t) for t in chart.locator("text").all_text_contents()]
    assert _plain(cell_text.removesuffix(" pts")) in printed  # the cell prints the number with its sign

    chart.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    area = chart.locator(".nsewdrag").first.bounding_box()  # the plot area, in viewport coordinates
    x = area["x"] + (col + 0.5) * area["width"] / len(RECEIVERS)
    y = area["y"] + (row + 0.5) * area["height"] / len(SENDERS)
    page.mouse.move(x, y)
    hover = chart.locator(".hoverlayer")
    hover.get_by_text("pts", exact=False).first.wait_for(timeout=10_000)
    assert f"penalty (pts, higher = worse): {_plain(cell_text)}" in _plain(hover.text_content())

    # -- the same cell on the Stitch page (its link), never trained: that very stitch ---------------------------
    page.mouse.click(x, y)
    page.wait_for_url("**/stitch?**", timeout=60_000)
    query = {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}
    assert (query["cut_a"], query["cut_b"], query["init"]) == (*CELL, "lstsq")
    open_app(page, f"{app_url}/stitch?{urlencode({**query, 'epochs': '0'})}")
    page.get_by_role("button", name="Launch").click()
    card = _card(page, "Penalty (B − stitched)")
    run_id = re.search(r"run=([0-9a-f]{16})", page.url)[1]
    assert _plain(card) == _plain(cell_text)  # same number, unit and sign as the heat map's cell
    assert store.lookup(run_id).summary["penalty"] == stored  # the very stitch of the cell, stored as a fraction

    # -- Results: the table's CSV (penalty_pts) and the run's own view ---------------------------------------
    open_app(page, f"{app_url}/results")
    saved = download(page, page.locator('[data-testid="stDownloadButton"]', has_text="Table as CSV").first,
                     tmp_path)  # fmt: skip
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(saved.read_text(encoding="utf-8")))}
    assert "penalty_pts" in next(iter(rows.values()))  # the column says its unit
    listed = float(rows[run_id]["penalty_pts"])
    assert listed == pytest.approx(cell_pts) and _plain(format_pts(listed)) == _plain(card)
    assert penalty_pts(stored) == pytest.approx(listed)
    open_app(page, f"{app_url}/results?run={run_id}")
    assert _plain(_card(page, "Penalty (B − stitched)")) == _plain(card)
