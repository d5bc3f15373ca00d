"""The Stitch page in a real browser, opened by a URL that names cuts by their aliases (issue 11).

``cut_a=layer2`` on a zoo ResNet (one block per stage) is the stage, whose output is its last
block's: the picker selects ``layer2.0``, says "layer2 = layer2.0", and the stitch runs.
"""

from __future__ import annotations

import os
from pathlib import Path

from stitchcore.store.results import Store
from tests.e2e.conftest import open_app


def _train_resnets(store_dir: Path) -> list[str]:
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.zoo import ZooRecipe

    store = Store(store_dir)  # the server's store: the models appear in its lists
    try:
        return [run_experiment("zoo", ZooRecipe(arch="resnet", dataset="digits", seed=s, epochs=1), store)
                .record.summary["ref"] for s in (0, 1)]
    finally:
        store.close()


def test_stitch_page_url_with_stage_aliases(app_url, e2e_store, page):
    refs = _train_resnets(e2e_store)
    open_app(page, f"{app_url}/stitch?a={refs[0]}&b={refs[1]}&cut_a=layer2&cut_b=layer3&epochs=0")
    page.get_by_text("layer2 = layer2.0").first.wait_for(timeout=60_000)  # the alias note under the picker
    page.get_by_text("layer3 = layer3.0").first.wait_for(timeout=60_000)
    for label, canonical in (("Sender cut (A)", "layer2.0  (= layer2)"), ("Receiver cut (B)", "layer3.0  (= layer3)")):
        box = page.locator('[data-testid="stSelectbox"]', has_text=label).first
        shown = box.inner_text() + " " + " ".join(i.input_value() for i in box.locator("input").all())
        assert canonical.replace("  ", " ") in " ".join(shown.split()), box.inner_html()[:3000]  # selected
    page.get_by_text("A[layer2.0] map (32, 4, 4) → B[layer3.0] map (64, 2, 2)").wait_for(timeout=60_000)
    shots = os.environ.get("STITCHLAB_SHOTS")  # e.g. /tmp/shots11: keep a picture of the form
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(shots) / "stitch_alias_form.png"), full_page=True)
    page.get_by_role("button", name="Launch").click()
    page.locator('[data-testid="stMetric"]', has_text="Stitched accuracy").first.wait_for(timeout=180_000)
    assert "run=" in page.url and "cut_a=layer2.0" in page.url  # the URL now holds the canonical names
    if shots:
        page.screenshot(path=str(Path(shots) / "stitch_alias_result.png"), full_page=True)
    assert "Traceback" not in page.content()
