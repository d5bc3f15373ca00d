"""The Similarity page in a real browser: launch a matrix, watch it fill, click a cell to open it."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from tests.e2e.conftest import open_app


def test_matrix_cell_click_opens_the_stitch_page(app_url, page):
    open_app(page, f"{app_url}/")
    page.get_by_role("button", name="Run the classroom demo").click()  # trains the two digit CNNs (or cached)
    page.locator('[data-testid="stMetric"]', has_text="Stitched accuracy").first.wait_for(timeout=180_000)
    open_app(page, f"{app_url}/similarity?a=zoo:cnn-digits-s0&b=zoo:cnn-digits-s1")  # other tests add models
    page.get_by_role("button", name="Launch").click()
    page.get_by_text("Click a cell of the stitching panel").wait_for(timeout=120_000)
    assert "run=" in page.url and "cka=" in page.url
    # beside the stitching panel: CKA calibrated against random-init Bs (5 untrained Bs: the run takes longer)
    page.locator(".js-plotly-plot", has_text="Linear CKA, beyond random-init B").first.wait_for(timeout=120_000)
    page.locator(".js-plotly-plot").nth(1).wait_for(timeout=30_000)  # stitching accuracy + calibrated CKA

    # The digit CNN has 5 cuts (block1, block2, flatten, fc1, fc2): click row fc1, column fc2.
    chart = page.locator(".js-plotly-plot").first
    chart.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    area = chart.locator(".nsewdrag").first.bounding_box()  # the plot area, in viewport coordinates
    rows = cols = 5
    x = area["x"] + (4 + 0.5) * area["width"] / cols
    y = area["y"] + (3 + 0.5) * area["height"] / rows
    page.mouse.move(x, y)
    page.wait_for_timeout(300)  # plotly picks the hovered point, then the click selects it
    page.mouse.click(x, y)
    page.wait_for_url("**/stitch?**", timeout=60_000)
    query = parse_qs(urlparse(page.url).query)
    assert query["cut_a"] == ["fc1"] and query["cut_b"] == ["fc2"], page.url
    assert query["a"] == ["zoo:cnn-digits-s0"] and query["b"] == ["zoo:cnn-digits-s1"]
    page.get_by_text("A[fc1] vector (64,) → B[fc2] vector (32,)").wait_for(timeout=60_000)
