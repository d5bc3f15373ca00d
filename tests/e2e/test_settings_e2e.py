"""Settings in a real browser: switch this server's jobs to a Ray started on it, then a matrix launched
from the Similarity page runs as Ray tasks and its view says so; back to "This server", that Ray stops.  Its own server over a copy of the
session's trained store, so the other browser tests keep the local backend."""

from __future__ import annotations

import os

from tests.conftest import copy_store
from tests.e2e.conftest import open_app, serve
from tests.ray_helpers import RAY_ENV


def test_switch_to_ray_then_a_matrix_runs_there(page, _trained, tmp_path, monkeypatch):
    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)  # the server (and its job worker and probe) inherit them
    copy_store(_trained[2], tmp_path / "store")  # the two CNNs as first trained: no matrix of them yet
    shots = os.environ.get("STITCHLAB_SHOTS")  # a folder to keep screenshots in, when looking at the pages
    with serve(tmp_path / "store") as url:
        open_app(page, f"{url}/settings")
        page.get_by_text("Now: This server").wait_for()
        page.get_by_text("A Ray cluster", exact=True).last.click()  # the radio option (the text also opens the page)
        page.get_by_role("button", name="Save", exact=True).click()
        page.get_by_text("Saved.").wait_for(timeout=240_000)  # a Ray start: ~20 s alone, minutes beside a busy suite
        page.get_by_text("Now: A Ray cluster — a Ray started on this machine").wait_for()
        if shots:
            page.screenshot(path=f"{shots}/settings.png", full_page=True)

        open_app(page, f"{url}/similarity?a=zoo:cnn-digits-s0&b=zoo:cnn-digits-s1")
        page.get_by_role("button", name="Launch").click()
        where = page.get_by_text("Computed on a Ray started on the server: 1 node")
        where.wait_for(timeout=300_000)  # Ray workers import torch first: slow beside a busy suite
        page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
        if shots:
            where.scroll_into_view_if_needed()
            page.screenshot(path=f"{shots}/similarity-ray.png", full_page=True)
        open_app(page, f"{url}/settings")
        page.get_by_text("Now: A Ray cluster").wait_for()  # saved for the server, seen by a fresh page

        page.get_by_text("This server", exact=True).last.click()  # back: the Ray started here (~2 GB) stops
        page.get_by_role("button", name="Save", exact=True).click()
        page.get_by_text("The Ray started on this server is stopped").wait_for(timeout=120_000)
        page.get_by_text("Now: This server").wait_for()
        if shots:
            page.screenshot(path=f"{shots}/settings-back.png", full_page=True)
