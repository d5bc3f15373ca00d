"""Every Launch button says how long its run takes here (issue 24, item 3): Home's demo, Models' Train, the
Stitch, Similarity and Assemble Launch buttons, each Traits preset and the sweep, the char-GPT Train button."""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import open_app

ESTIMATE = re.compile(r"About \d+ (s|min)|In the store already")
PAGES = {  # page -> how many launch buttons it shows on a store with two digit CNNs
    "": 1, "models": 1, "stitch": 1, "similarity": 1, "traits": 8, "assemble": 1, "language": 1,
}


@pytest.mark.parametrize("path", list(PAGES))
def test_every_launch_button_has_an_estimate(trained_url, page, path):
    open_app(page, f"{trained_url}/{path}")
    main = page.locator('[data-testid="stMainBlockContainer"]')
    page.wait_for_function(  # calibrations run in the background; the page reruns when each is in
        """([n, pattern]) => (document.querySelector('[data-testid="stMainBlockContainer"]').innerText
                              .match(new RegExp(pattern, 'g')) || []).length >= n""",
        arg=[PAGES[path], ESTIMATE.pattern], timeout=240_000)
    found = ESTIMATE.findall(main.inner_text())
    assert len(found) >= PAGES[path], (path, found)
