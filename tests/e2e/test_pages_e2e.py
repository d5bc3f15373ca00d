"""Traits and Language models pages in a real browser: a preset's plots, a merge of two char-GPTs."""

from __future__ import annotations

import pytest

from stitchcore.store.results import Store
from tests.e2e.conftest import open_app
from tests.lm_helpers import train_tiny


@pytest.mark.timeout(600)  # three sweeps of the report's 20-epoch stitch at five cuts, one with its control twins
def test_traits_preset_runs_and_draws_its_plots(app_url, page):
    open_app(page, f"{app_url}/traits")
    page.locator(".st-key-preset_distributed button").first.click()  # recipes, then the sweep, as background jobs
    page.wait_for_url("**preset=distributed**", timeout=60_000)
    chart = page.locator(".js-plotly-plot", has_text="accuracy on class 3 along the cut").first
    chart.wait_for(timeout=120_000)  # the preset's panel: the claim beside its random-init and plain A
    for line in ("A never saw a 3, B is plain", "random-init A -> B (plain)", "plain A (A's seed, no trait) -> B (plain)"):
        chart.get_by_text(line, exact=True).wait_for(timeout=420_000)  # drawn, no longer "(waiting)"
    page.get_by_text("Sweep: A never saw a 3, B is plain", exact=False).first.click()  # its own plots
    page.get_by_text("Per-class accuracy of the stitched model", exact=True).first.wait_for(timeout=60_000)
    page.locator(".js-plotly-plot").nth(3).wait_for(timeout=30_000)  # trait curves, simplicity raw + normalised, classes
    assert "Traceback" not in page.content()


def test_language_models_merge_shows_losses_and_samples(app_url, e2e_store, page):
    store = Store(e2e_store)  # the server's store: two tiny char-GPTs appear in its model lists
    refs = [train_tiny(store, 0), train_tiny(store, 1)]
    store.close()
    open_app(page, f"{app_url}/language")
    page.get_by_text("Merge", exact=True).first.click()
    page.get_by_text("A.wte → A.wpe").first.wait_for(timeout=60_000)  # the part list, shown before running
    page.get_by_role("button", name="Launch").click()
    page.locator('[data-testid="stMetric"]', has_text="Loss merged").first.wait_for(timeout=180_000)
    assert "run=" in page.url
    assert refs[0].removeprefix("zoo:") in page.content()
    page.locator('[data-testid="stCode"]').nth(3).wait_for(timeout=30_000)  # the part list and A, B, merged samples
    assert "Traceback" not in page.content()
