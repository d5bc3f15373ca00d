"""The one run kind tests/fixtures/store_v1 lacks, an LM stitch, made here on the fixture's char-GPTs
and opened by link on Results and on the Language page, each in a fresh browser context (issue 11, item 2)."""

from __future__ import annotations

import pytest

from stitchcore.experiments.lm import LMStitchSpec
from tests.e2e.conftest import open_app, serve, v1_with_run

GPTS = ("zoo:gpt-pydoc-s0-adamw-0a2972", "zoo:gpt-pydoc-s1-adamw-0b2075")  # the fixture's two char-GPTs


@pytest.fixture(scope="module")
def lm_server(tmp_path_factory):
    """A server over a copy of store_v1 plus one small LM stitch run; yields (url, run id)."""
    spec = LMStitchSpec(a=GPTS[0], b=GPTS[1], cut_a=1, steps=20, eval_windows=16, sample_tokens=40)
    dst, run_id = v1_with_run(tmp_path_factory, "e2e-lmstitch", "lmstitch", spec)
    with serve(dst) as url:
        yield url, run_id


@pytest.mark.parametrize("page_path", ["results", "language"])
def test_lmstitch_run_opens_by_link(lm_server, page, page_path):
    url, run_id = lm_server
    open_app(page, f"{url}/{page_path}?run={run_id}")
    page.get_by_text("· lmstitch · done").first.wait_for(timeout=60_000)
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0
    page.locator('[data-testid="stMetric"]', has_text="Loss").first.wait_for(timeout=30_000)
    assert "waiting for the first steps" not in page.content().lower()
    if page_path == "results":
        link = page.get_by_role("link", name="Open on the Language models page")
        link.wait_for(timeout=30_000)
        assert link.get_attribute("href").endswith(f"language?run={run_id}")
