"""StitchLab in a real browser: the classroom demo, permalinks, Stop, bad uploads."""

from __future__ import annotations

import re
import time

from tests.e2e.conftest import open_app


def _metric(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]', has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text()


def _wait_for_card(page, timeout_ms: int = 180_000) -> None:
    """The result card's first metric (Home's prose also says "stitched accuracy": match the metric)."""
    page.locator('[data-testid="stMetric"]', has_text="Stitched accuracy").first.wait_for(timeout=timeout_ms)


def test_classroom_demo_then_permalink(app_url, page, browser, capsys):
    open_app(page, f"{app_url}/")
    started = time.monotonic()
    page.get_by_role("button", name="Run the classroom demo").click()
    _wait_for_card(page)
    seconds = time.monotonic() - started
    with capsys.disabled():
        print(f"\n[e2e] classroom demo: {seconds:.1f} s from click to result card")
    accuracy = _metric(page, "Stitched accuracy")
    assert re.fullmatch(r"\d+\.\d%", accuracy), accuracy
    assert float(accuracy[:-1]) > 80
    page.get_by_text("Training curve").first.wait_for()
    page.locator(".js-plotly-plot").nth(1).wait_for(timeout=30_000)  # charts can draw a moment apart
    assert "run=" in page.url

    other = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    open_app(other, page.url)
    _wait_for_card(other, 60_000)
    assert _metric(other, "Stitched accuracy") == accuracy
    other.context.close()


def test_stop_cancels_a_running_job(app_url, page):
    # The demo test (or this one) has trained the digit CNNs; a long random-init stitch gives time to stop it.
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
