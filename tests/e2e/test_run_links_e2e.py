"""Run links in a real browser: a run of each kind in tests/fixtures/store_v1 opens in its kind's own view, both
on Results (``results?run=ID``) and on the page that made it (``similarity?run=ID`` ...), each link opened in
a fresh browser context, as a shared link would be.  The fixture's other three zoo runs open the same view:
every run of the fixture opens on Results with the link to its page in tests/test_app_results.py (AppTest)."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import open_app

PAGE = {"zoo": "models", "stitch": "stitch", "matrix": "similarity", "similarity": "similarity",
        "sweep": "traits", "merge": "language", "lmdepth": "language"}  # fmt: skip
PAGE_TITLE = {"models": "Models", "stitch": "Stitch", "similarity": "Similarity", "traits": "Traits",
              "language": "Language models"}  # fmt: skip
RUNS = {  # the fixture's runs (as in tests/test_store_compat.py)
    "3a5c8fd66da321ff": "zoo",
    "6d9f490702433fc1": "stitch", "948efef379ab0882": "matrix", "85d6995881b3ee60": "similarity",
    "2daff2acaae2878b": "sweep", "7b32b03feebed0fd": "merge", "70492b7db4bce988": "lmdepth",
}  # fmt: skip
# the matrix's link names the similarity run launched with it (its measure is not in the matrix's spec)
LINK_EXTRA = {"948efef379ab0882": "&cka=85d6995881b3ee60"}
# What each kind's own view shows: ("metric", label) for a metric card, ("chart", text) for a plotly chart.
CONTENT = {
    "zoo": [("metric", "Test accuracy")],
    "stitch": [("metric", "Stitched accuracy"), ("metric", "Penalty")],
    "matrix": [("chart", "Stitching accuracy"), ("chart", "Linear CKA")],  # the similarity run launched with it
    "similarity": [("chart", "Linear CKA")],
    "sweep": [("chart", "Per-class accuracy of the stitched model")],
    "merge": [("metric", "Loss merged"), ("chart", "Validation loss")],
    "lmdepth": [("metric", "Loss A"), ("chart", "Loss penalty vs split depth")],
}


def _assert_kind_view(page, run_id: str, kind: str) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, page.locator(
        '[data-testid="stException"]').first.inner_text()  # fmt: skip
    errors = page.locator('[data-testid="stAlertContentError"]')
    assert errors.count() == 0, errors.first.inner_text()
    page.get_by_text(f"· {kind} · done").first.wait_for(timeout=30_000)  # the run's own header
    for what, text in CONTENT[kind]:
        if what == "metric":
            page.locator('[data-testid="stMetric"]', has_text=text).first.wait_for(timeout=30_000)
        else:
            page.locator(".js-plotly-plot", has_text=text).first.wait_for(timeout=30_000)
    assert "waiting for the first steps" not in page.content().lower()


@pytest.mark.parametrize("run_id", RUNS)
def test_results_link_opens_the_kinds_own_view(v1_url, page, run_id):
    kind = RUNS[run_id]
    open_app(page, f"{v1_url}/results?run={run_id}")
    _assert_kind_view(page, run_id, kind)
    link = page.get_by_role("link", name=f"Open on the {PAGE_TITLE[PAGE[kind]]} page")
    link.first.wait_for(timeout=30_000)  # drawn beside the view, possibly a moment after it
    assert link.count() == 1
    assert link.get_attribute("href").endswith(f"{PAGE[kind]}?run={run_id}{LINK_EXTRA.get(run_id, '')}")


@pytest.mark.parametrize("run_id", RUNS)
def test_owning_page_link_opens_the_same_view(v1_url, page, run_id):
    kind = RUNS[run_id]
    open_app(page, f"{v1_url}/{PAGE[kind]}?run={run_id}")
    assert f"/{PAGE[kind]}" in page.url
    _assert_kind_view(page, run_id, kind)
