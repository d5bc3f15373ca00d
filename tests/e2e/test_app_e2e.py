"""StitchLab in a real browser: Stop, bad uploads.  The classroom demo from an empty store, its result and its
permalink in a fresh browser: tests/e2e/test_progress_e2e.py."""

from __future__ import annotations

import re

from tests.e2e.conftest import open_app


def _wait_for_card(page, timeout_ms: int = 180_000) -> None:
    """The result card's first metric (Home's prose also says "stitched accuracy": match the metric)."""
    page.locator('[data-testid="stMetric"]', has_text="Stitched accuracy").first.wait_for(timeout=timeout_ms)


def test_stop_cancels_a_running_job(app_url, page):
    # The demo trains the digit CNNs (or finds them in the store); a long random-init stitch gives time to stop it.
    open_app(page, f"{app_url}/")
    page.get_by_role("button", name="Run the classroom demo").click()
    _wait_for_card(page)
    query = "a=zoo:cnn-digits-s0&b=zoo:cnn-digits-s1&cut_a=block1&cut_b=block1&init=random&epochs=500&seed=7"
    open_app(page, f"{app_url}/stitch?{query}")
    page.get_by_role("button", name="Launch").click()
    stop = page.get_by_role("button", name="Stop")
    stop.wait_for(timeout=60_000)
    stop.click()
    page.get_by_text("This run was cancelled").wait_for(timeout=60_000)
    # Results opens the cancelled run by link with its whole id and no literal "None" (issue 11, item 8)
    run_id = re.search(r"run=([0-9a-f]{16})", page.url)[1]
    open_app(page, f"{app_url}/results?run={run_id}")
    page.get_by_text(f"run {run_id} · stitch · cancelled").first.wait_for(timeout=60_000)
    assert "None" not in page.locator('[data-testid="stMainBlockContainer"]').inner_text()


def test_invalid_upload_shows_a_clear_error(app_url, page, tmp_path):
    bad = tmp_path / "not-a-model.pt"
    bad.write_bytes(b"these bytes are no checkpoint at all\n" * 20)
    open_app(page, f"{app_url}/models")
    page.get_by_text("Upload a checkpoint").click()
    page.locator('[data-testid="stFileUploader"] input[type=file]').set_input_files(str(bad))
    page.get_by_role("textbox", name="Checkpoint architecture").fill("zoo:cnn")
    page.get_by_role("textbox", name="Checkpoint architecture").press("Enter")
    page.get_by_role("button", name="Load upload").click()
    alert = page.locator('[data-testid="stAlertContentError"]').first
    alert.wait_for(timeout=60_000)
    text = alert.inner_text()
    assert "not-a-model.pt" in text and "checkpoint" in text, text
    assert "Traceback" not in page.content()
