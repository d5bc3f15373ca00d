"""Two servers show the same weights for the same random-init ref, in a real browser.

The user's report: the same run id on ``timm:...?pretrained=false`` showed 10.5% on one server and 12.0% on
another; each process drew its own random weights from wherever its RNG happened to be.  Now random init
is seeded by the ref (``seed=N``, default 0), and the Models page shows the weights' fingerprint, so a
person can see two servers hold the same weights.  The second server loads another random model first
(a different RNG history, as a server that did other work), which once changed its draw.
"""

from __future__ import annotations

import re

from stitchcore.models.info import weights_fingerprint
from stitchcore.models.sources import load_model
from tests.e2e.conftest import open_app, serve

REF = "timm:resnet18?num_classes=10&pretrained=false"  # canonical spelling
OTHER = "torchvision:resnet18?num_classes=10&weights=none"
WEIGHTS = re.compile(r"Weights (.*?)fingerprint ([0-9a-f]{12})")


def _inspect(page, ref: str) -> tuple[str, str]:
    """Type ``ref`` into the Models page, press Inspect; the Weights line's (description, fingerprint)."""
    box = page.get_by_role("textbox", name="Model ref")
    box.fill(ref)
    box.press("Enter")
    page.get_by_role("button", name="Inspect").click()
    page.locator("h4", has_text=ref).wait_for(timeout=120_000)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                           timeout=60_000)  # the script has finished: no stale Weights line is read
    line = page.locator('[data-testid="stMarkdownContainer"]', has_text="fingerprint").first
    found = WEIGHTS.search(line.inner_text())
    assert found, line.inner_text()
    return found.group(1).strip(" ·"), found.group(2)


def test_two_servers_show_the_same_fingerprint_for_a_random_init_ref(page, tmp_path):
    expected = weights_fingerprint(load_model(REF).model)  # this process: a third RNG history
    with serve(tmp_path / "store-1") as first, serve(tmp_path / "store-2") as second:
        open_app(page, f"{first}/models")
        init_1, fingerprint_1 = _inspect(page, REF)

        open_app(page, f"{second}/models")
        _inspect(page, OTHER)  # this server draws another model's weights first
        init_2, fingerprint_2 = _inspect(page, REF)
        seed_1 = _inspect(page, REF + "&seed=1")
        assert "Traceback" not in page.content()

    assert init_1 == init_2 == "random init, seed 0"
    assert fingerprint_1 == fingerprint_2 == expected
    assert seed_1[0] == "random init, seed 1" and seed_1[1] != expected
