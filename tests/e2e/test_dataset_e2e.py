"""Hub models stitched from the browser (issue 11, item 1): the pages ask for a dataset, check it against
both heads before Launch, offer ``num_classes`` for random-init models, and keep the dataset in the URL.

A = timm resnet18 and B = torchvision resnet18, both random init (no download), as the user reported.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlencode

from tests.e2e.conftest import open_app

HUB = {"a": "timm:resnet18?pretrained=false", "b": "torchvision:resnet18?weights=none"}
FIXED = {"a": "timm:resnet18?num_classes=10&pretrained=false", "b": "torchvision:resnet18?num_classes=10&weights=none"}
SLOW = 240_000  # loading two ResNet-18s on 2 busy cores


def _shot(page, name: str) -> None:
    shots = os.environ.get("STITCHLAB_SHOTS")  # e.g. /tmp/shots11: keep a picture of each step
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(shots) / f"{name}.png"), full_page=True)


def _launch(page, label: str = "Launch"):
    return page.get_by_role("button", name=label, exact=True)


def _settled(page) -> None:
    page.wait_for_timeout(500)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=SLOW)


def test_stitch_hub_models_needs_a_dataset_and_matching_heads(app_url, page, browser):
    quick = {"cut_a": "layer4", "cut_b": "layer4", "epochs": 0, "max_train": 24, "max_test": 24}
    open_app(page, f"{app_url}/stitch?{urlencode({**HUB, **quick})}")
    page.get_by_text("Launch is disabled: choose a dataset").wait_for(timeout=SLOW)
    assert _launch(page).is_disabled()
    _shot(page, "dataset_missing")

    page.locator('[data-testid="stSelectbox"]', has_text="Dataset").click()
    page.get_by_role("option", name="digits", exact=True).click()
    page.get_by_text("has 1000 outputs but digits has 10 classes").first.wait_for(timeout=SLOW)
    assert _launch(page).is_disabled()
    page.get_by_text("Launch is disabled: model A").wait_for()
    _shot(page, "dataset_heads")

    for role in ("a", "b"):  # each fix reruns the page with the model's new ref
        page.get_by_role("button", name=f"Use {FIXED[role]}").click()
        page.get_by_role("button", name=f"Use {FIXED[role]}").wait_for(state="detached", timeout=SLOW)
    page.get_by_text("Data: digits · 10 classes").wait_for(timeout=SLOW)
    _settled(page)
    assert _launch(page).is_enabled()
    assert page.get_by_text("Launch is disabled").count() == 0

    _launch(page).click()
    page.locator('[data-testid="stMetric"]', has_text="Stitched accuracy").first.wait_for(timeout=SLOW)
    assert "dataset=digits" in page.url and "num_classes%3D10" in page.url, page.url
    _shot(page, "dataset_result")

    fresh = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()  # the link, elsewhere
    fresh.set_default_timeout(SLOW)
    open_app(fresh, page.url)
    fresh.locator('[data-testid="stMetric"]', has_text="Stitched accuracy").first.wait_for()
    box = fresh.locator('[data-testid="stSelectbox"]', has_text="Dataset").first
    assert "digits" in box.inner_text() + " ".join(i.input_value() for i in box.locator("input").all())
    assert "Traceback" not in fresh.content()
    fresh.context.close()


def test_similarity_and_traits_pages_ask_for_the_dataset(app_url, page):
    open_app(page, f"{app_url}/similarity?{urlencode(HUB)}")
    page.get_by_text("Launch is disabled: choose a dataset").wait_for(timeout=SLOW)
    assert _launch(page).is_disabled()
    open_app(page, f"{app_url}/similarity?{urlencode({**HUB, 'dataset': 'digits'})}")
    page.get_by_text("has 1000 outputs but digits has 10 classes").first.wait_for(timeout=SLOW)
    fix_b = page.get_by_role("button", name=f"Use {FIXED['b']}")
    fix_b.wait_for(timeout=SLOW)  # model A's check can show before model B has loaded
    assert fix_b.count() == 1
    _shot(page, "similarity_dataset")

    open_app(page, f"{app_url}/traits")  # "Your own sweep" is open on a page without a link
    page.get_by_role("button", name="Launch sweep").wait_for(timeout=SLOW)
    _settled(page)
    sweep = page.locator('[data-testid="stExpander"]', has_text="Your own sweep")
    if page.get_by_text("Launch sweep is disabled: pick models A and B").count():  # an empty store
        assert _launch(page, "Launch sweep").is_disabled()
    else:  # models trained by earlier tests are picked: the dataset picker shows, set to their data
        sweep.locator('[data-testid="stSelectbox"]', has_text="Dataset").first.wait_for(timeout=SLOW)
        sweep.get_by_text("Data: digits · 10 classes").wait_for(timeout=SLOW)
