"""Two processes show the same weights for the same random-init ref, a server in a real browser among them.

The user's report: the same run id on ``timm:...?pretrained=false`` showed 10.5% on one server and 12.0% on
another; each process drew its own random weights from wherever its RNG happened to be.  Now random init
is seeded by the ref (``seed=N``, default 0), and the Models page shows the weights' fingerprint, so a
person can see two servers hold the same weights.  The server loads another random model first (a different
RNG history, as a server that did other work, which once changed its draw) and must show what a fresh
process computes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from urllib.parse import quote

from tests.e2e.conftest import ROOT, open_app, serve

REF = "timm:resnet18?num_classes=10&pretrained=false"  # canonical spelling
OTHER = "torchvision:resnet18?num_classes=10&weights=none"
WEIGHTS = re.compile(r"Weights (.*?)fingerprint ([0-9a-f]{12})")


def _inspect(page, base: str, ref: str) -> tuple[str, str]:
    """Open the Models page on ``ref`` (a fresh page load: no Weights line of an earlier model can be read);
    the Weights line's (description, fingerprint)."""
    open_app(page, f"{base}/models?ref={quote(ref, safe='')}")
    page.locator("h4", has_text=ref).wait_for(timeout=120_000)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                           timeout=60_000)  # the script has finished
    lines = page.locator('[data-testid="stMarkdownContainer"]', has_text="fingerprint")
    lines.first.wait_for(timeout=120_000)
    assert lines.count() == 1, [lines.nth(i).inner_text() for i in range(lines.count())]
    found = WEIGHTS.search(lines.first.inner_text())
    assert found, lines.first.inner_text()
    return found.group(1).strip(" ·"), found.group(2)


def _fingerprint_in_a_fresh_process(ref: str) -> str:
    """The fingerprint a new Python process computes for ``ref`` (not this one: the test process has run other
    tests' code, and what that leaves behind is not what a server starts from)."""
    code = ("import sys; from stitchcore.models.info import weights_fingerprint; "
            "from stitchcore.models.sources import load_model; print(weights_fingerprint(load_model(sys.argv[1]).model))")
    out = subprocess.run([sys.executable, "-c", code, ref], cwd=ROOT, capture_output=True, text=True, check=True,
                         timeout=300)
    return out.stdout.strip().splitlines()[-1]


def test_a_server_shows_the_fingerprint_a_fresh_process_computes_for_a_random_init_ref(page, tmp_path):
    expected = _fingerprint_in_a_fresh_process(REF)  # another process, another RNG history
    with serve(tmp_path / "store") as server:
        _, other = _inspect(page, server, OTHER)  # this server draws another model's weights first
        init, fingerprint = _inspect(page, server, REF)
        seed_1 = _inspect(page, server, REF + "&seed=1")
        assert "Traceback" not in page.content()

    assert init == "random init, seed 0"
    assert fingerprint == expected != other
    assert seed_1[0] == "random init, seed 1" and seed_1[1] != expected
