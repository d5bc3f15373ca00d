"""A matrix with controls in a real browser: every control beside its debiased matrix, skipped cells marked
with their reason on hover, a CSV download under every panel; and the sweep and language-model views say
which way their penalty is worse."""

from __future__ import annotations

import csv
import io

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import download, open_app

SENDERS, RECEIVERS = ("block2", "fc1"), ("block2", "fc2")  # fc1 (a vector) cannot feed block2 (a map): skipped
CONTROLS = ("random sender", "random receiver", "both random", "noise sender")
DEBIASED = ("random sender", "noise sender")  # closed-form cells: only the controls fitted alike are subtracted


@pytest.fixture(scope="module")
def matrix_run(e2e_store):
    """Two digit CNNs trained in the e2e server's store, and a 2 x 2 matrix of them with controls."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.matrix import MatrixSpec
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.store.results import Store

    store = Store(e2e_store)
    refs = [run_experiment("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=s), store).record.summary["ref"]
            for s in (0, 1)]  # fmt: skip
    spec = MatrixSpec(refs[0], refs[1], senders=SENDERS, receivers=RECEIVERS, controls=True, max_test=200)
    return run_experiment("matrix", spec, store).record


def _chart(page, title: str):
    return page.locator(".js-plotly-plot", has_text=title).first


def test_matrix_link_shows_every_control_debiased_skips_and_csvs(app_url, page, matrix_run, tmp_path):
    s = matrix_run.summary
    assert s["skipped"] == {"fc1->block2": s["skipped"]["fc1->block2"]}
    open_app(page, f"{app_url}/similarity?run={matrix_run.id}")
    _chart(page, "Stitching accuracy").wait_for(timeout=60_000)
    for name in CONTROLS:
        _chart(page, f"Control: {name} (accuracy)").wait_for(timeout=30_000)
    for name in DEBIASED:
        _chart(page, f"Debiased: trained − {name}").wait_for(timeout=30_000)
    plots = page.locator(".js-plotly-plot")
    expect(plots).to_have_count(7, timeout=30_000)
    assert plots.filter(has_text="Control: ").count() == 4 and plots.filter(has_text="Debiased: ").count() == 2
    assert plots.count() == 7  # the stitching panel + 4 controls + 2 debiased
    # the two into a random receiver are task-trained (a closed-form fit there copies random B): each says, by its
    # panel, why it is drawn but never subtracted (the form above says it once for them too: "Controls.")
    refused = page.locator('[data-testid="stCaptionContainer"]', has_text="No debiased map: the matrix's cells are "
                           "closed-form least-squares fits").filter(has_text="Control: ")  # fmt: skip
    expect(refused).to_have_count(2)
    assert all(refused.filter(has_text=f"Control: {name}.").count() == 1 for name in ("random receiver", "both random"))
    page.get_by_text("grey × = pair skipped").first.wait_for()

    # every heat map marks the skipped pair: one "×" each (2 x 2 cells, one skipped)
    for i in range(plots.count()):
        assert plots.nth(i).locator("text", has_text="×").count() == 1, plots.nth(i).inner_text()[:200]

    # hovering the skipped cell (row fc1, column block2) shows why it was skipped, also on the clickable panel
    for title in ("Stitching accuracy", "Control: random sender (accuracy)"):
        chart = _chart(page, title)
        chart.scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        area = chart.locator(".nsewdrag").first.bounding_box()
        page.mouse.move(area["x"] + 0.25 * area["width"], area["y"] + 0.75 * area["height"])
        hover = chart.locator(".hoverlayer")
        hover.get_by_text("skipped:", exact=False).first.wait_for(timeout=10_000)
        assert "vector" in hover.text_content(), hover.text_content()
        page.mouse.move(0, 0)

    # one CSV download per panel; the stitching panel's holds its numbers, senders down, receivers across
    buttons = page.locator('[data-testid="stDownloadButton"]').filter(has_text="CSV: ")
    expect(buttons).to_have_count(7, timeout=30_000)
    assert buttons.filter(has_text="CSV: Debiased: ").count() == 2  # random sender, noise sender
    saved = download(page, buttons.filter(has_text="CSV: Debiased: trained − random sender").first, tmp_path)
    rows = list(csv.reader(io.StringIO(saved.read_text(encoding="utf-8"))))
    assert rows[0] == ["debiased_pts: sender (A) \\ receiver (B)", *RECEIVERS]  # the cells' unit in the corner
    assert [r[0] for r in rows[1:]] == list(SENDERS)
    want = s["debiased_by_control"]["random_sender"]  # stored as a fraction; shown and saved in points
    assert rows[2][1] == "" and float(rows[1][2]) == pytest.approx(100 * want[0][1])


def test_penalty_views_say_which_way_is_worse(v1_url, page):
    open_app(page, f"{v1_url}/language?run=70492b7db4bce988")  # the fixture store's LM depth sweep
    chart = _chart(page, "Loss penalty vs split depth")
    chart.wait_for(timeout=60_000)
    assert "(% of base loss, higher = worse)" in chart.inner_text() and "▲ worse" in chart.inner_text()
    note = chart.evaluate("el => el.layout.legend.title.text").replace("<br>", " ")  # drawn as lines under the axis
    assert "(L_base − L) / L_base is this with the sign flipped" in note  # the paper's own sign, named
    page.get_by_text("The loss penalty = (L − L_base) / L_base (% of base loss, higher = worse)").first.wait_for()

    open_app(page, f"{v1_url}/traits?run=2daff2acaae2878b")  # its trait sweep (accuracy metric)
    chart = _chart(page, "Stitching penalty along the cut")
    chart.wait_for(timeout=60_000)
    assert "(pts, higher = worse)" in chart.inner_text() and "▲ worse" in chart.inner_text()
    page.get_by_text("Stitching penalty = B − stitched (pts, higher = worse)").first.wait_for()
    assert "Red = worse" not in page.locator('[data-testid="stMainBlockContainer"]').inner_text()  # no red lines
