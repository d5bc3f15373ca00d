"""The transfer kind (issue 43), made here on store_v1's two digit CNNs and opened by link on Results and on the
Transfer page, each in a fresh browser context: its figures, its table and no error."""

from __future__ import annotations

import pytest

from stitchcore.experiments import new_spec
from tests.e2e.conftest import open_app, serve, v1_with_run

CNNS = ("zoo:cnn-digits-s0-3a5c8f", "zoo:cnn-digits-s1-d927a0")  # the fixture's two digit CNNs


@pytest.fixture(scope="module")
def transfer_server(tmp_path_factory):
    """A server over a copy of store_v1 plus one transfer along depth; yields (url, run id)."""
    spec = new_spec("transfer", {"a": CNNS[0], "b": CNNS[1], "max_train": 300, "max_test": 200})
    dst, run_id = v1_with_run(tmp_path_factory, "e2e-transfer", "transfer", spec)
    with serve(dst) as url:
        yield url, run_id


@pytest.mark.parametrize("page_path", ["results", "transfer"])
def test_a_transfer_run_opens_by_link(transfer_server, page, page_path):
    url, run_id = transfer_server
    open_app(page, f"{url}/{page_path}?run={run_id}")
    page.get_by_text("· transfer · done").first.wait_for(timeout=60_000)
    page.get_by_text("Transferred / native accuracy along depth").first.wait_for(timeout=30_000)
    page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=30_000)  # one row per cut pair
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0
    if page_path == "results":
        link = page.get_by_role("link", name="Open on the Transfer page")
        link.wait_for(timeout=30_000)
        assert link.get_attribute("href").endswith(f"transfer?run={run_id}")
