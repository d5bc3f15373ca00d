"""The Language models page in a real browser: a merge of two char-GPTs.

A Traits preset's Run button (its models, then its sweeps, the panel drawn with its references) is walked by
tests/test_app_traits.py (AppTest: the panel's lines and their styles, the permalink in a fresh session); a
preset's panel drawn in a real browser by tests/e2e/test_bansal_e2e.py.
"""

from __future__ import annotations

from stitchcore.store.results import Store
from tests.e2e.conftest import open_app
from tests.lm_helpers import train_tiny


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
