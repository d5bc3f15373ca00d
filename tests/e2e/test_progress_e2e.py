"""Long jobs announced and followed, in a real browser (issue item 6): an estimate before Launch, the time
left on a running job's progress bar, a model that finished training listed without a reload (the training
section open until both models the page joins exist), and the classroom demo's models training in the page itself, then its result
opened by its link in a fresh browser.

``STITCHLAB_SHOTS=/tmp/shots`` keeps a picture of each (estimate.png, eta.png, demo.png).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import open_app, serve

SLOW = 300_000  # a char-GPT on 2 busy cores
IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
ESTIMATED = ("() => { const t = document.querySelector('[data-testid=\"stMain\"]').innerText;"
             " return t.includes('on this machine') && !t.includes('Estimating'); }")


def _shot(page, name: str, at=None) -> None:
    """A picture of the window (scrolled to ``at``, a locator) under $STITCHLAB_SHOTS."""
    shots = os.environ.get("STITCHLAB_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        if at is not None:
            at.scroll_into_view_if_needed()
        page.screenshot(path=str(Path(shots) / f"{name}.png"))


def _metric(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]', has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text()


def _train_section(page):
    """The Language page's train form (its labels are the zoo recipe's own: other forms on the page share them)."""
    return page.locator('[data-testid="stExpander"]', has_text="Train a GPT here")


def _number(page, label: str, value: int) -> None:
    box = _train_section(page).get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Enter")
    page.wait_for_timeout(1000)  # the rerun starts
    page.wait_for_function(IDLE, timeout=60_000)


def _train_form(page, seed: int, epochs: int, batch: int) -> None:
    """Fill in the Language page's train form (open while no char-GPT exists) and wait for its estimate."""
    _train_section(page).get_by_label("Random seed", exact=True).wait_for(state="visible")
    _number(page, "Random seed", seed)
    _number(page, "Training epochs", epochs)
    _number(page, "Batch size", batch)
    page.wait_for_function(ESTIMATED, timeout=SLOW)  # this recipe timed in the background, then shown
    page.wait_for_function(IDLE, timeout=60_000)


@pytest.fixture(scope="module")
def lm_url(tmp_path_factory):
    """A server over its own empty store: the train form is open only while no char-GPT exists, and
    earlier browser tests train char-GPTs in the shared one."""
    with serve(tmp_path_factory.mktemp("e2e-progress") / "store") as url:
        yield url


def test_a_running_trainings_bar_says_how_long_is_left(lm_url, page):
    app_url = lm_url
    open_app(page, f"{app_url}/language")
    main = page.locator('[data-testid="stMain"]')
    _train_form(page, seed=13, epochs=10, batch=64)  # 500 steps: long enough for a rate on any machine
    assert main.get_by_text(re.compile(r"About .+ on this machine")).count() == 1  # right above the button
    page.get_by_role("button", name="Train GPT", exact=True).click()
    left = main.locator('[data-testid="stProgress"]', has_text=re.compile(r"\d+% · about .+ left"))
    left.first.wait_for(timeout=SLOW)  # the training's own bar on this page, once its rate means something
    _shot(page, "eta")
    link = main.get_by_role("link", name=re.compile(r"train gpt on pydoc \(seed 13")).first
    page.goto(f"{app_url}/{link.get_attribute('href').lstrip('/')}")  # its run page, with Stop
    page.locator('[data-testid="stProgress"]', has_text=re.compile(r"· about .+ left")).first.wait_for(timeout=SLOW)
    page.get_by_role("button", name="Stop").click()  # free the CPU for the other tests
    page.get_by_text("This run was cancelled").wait_for(timeout=SLOW)


def test_language_page_lists_a_char_gpt_that_finished_without_a_reload(lm_url, page):
    app_url = lm_url
    open_app(page, f"{app_url}/language")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_text("No GPTs trained yet").wait_for()
    _train_form(page, seed=11, epochs=1, batch=2)  # 50 tiny steps
    estimate = main.get_by_text(re.compile(r"About .+ on this machine"))
    assert estimate.count() == 1
    _shot(page, "estimate")
    page.get_by_role("button", name="Train GPT", exact=True).click()
    # no reload: the page reruns itself when the training ends, and picker A follows the new model
    page.wait_for_function("""() => [...document.querySelectorAll('input[aria-label="Model A"]')]
        .some(e => /^zoo:gpt-pydoc-s11-adamw-[0-9a-f]{6}$/.test(e.value))""", timeout=SLOW)
    main.get_by_text("One GPT trained: train another").wait_for()  # drawn after the section, same rerun
    assert main.get_by_text("No GPTs trained yet").count() == 0
    page.wait_for_function(IDLE, timeout=60_000)
    page.wait_for_timeout(1000)  # (a section folded by that rerun is folded by now)
    section = main.locator('[data-testid="stExpander"]', has_text="Train a GPT here").locator("details")
    assert section.get_attribute("open") is not None  # still open: the page joins two models, one exists
    assert _train_section(page).get_by_label("Batch size", exact=True).input_value() == "2"  # the form kept its values
    _shot(page, "one-of-two", at=section)

    _number(page, "Random seed", 12)  # the second model: once it is listed, the section folds
    page.wait_for_function(ESTIMATED, timeout=SLOW)
    page.get_by_role("button", name="Train GPT", exact=True).click()
    main.get_by_text("One GPT trained").wait_for(state="detached", timeout=SLOW)  # the rerun that lists it
    page.wait_for_function(IDLE, timeout=60_000)
    expect(section).not_to_have_attribute("open", re.compile(".*"))
    page.wait_for_function("""() => [...document.querySelectorAll('input[aria-label="Model B"]')]
        .some(e => /^zoo:gpt-pydoc-s12-adamw-[0-9a-f]{6}$/.test(e.value))""")  # B follows the second model
    _shot(page, "two-of-two")


def test_classroom_demo_trains_its_models_in_the_page_and_its_link_shows_the_result(tmp_path, browser, capsys):
    page = browser.new_context(viewport={"width": 1400, "height": 1900}).new_page()  # the run view is below the form
    page.set_default_timeout(60_000)
    with serve(tmp_path / "store") as url:  # an empty store: the demo must train its models first
        open_app(page, f"{url}/")
        page.wait_for_function(ESTIMATED, timeout=SLOW)  # the models and the stitch, estimated
        page.get_by_role("button", name="Run the classroom demo").click()
        started = time.monotonic()
        main = page.locator('[data-testid="stMain"]')
        waiting = main.get_by_text("Waiting for its models to train")
        waiting.wait_for(timeout=SLOW)  # the stitch's run view, while it is queued behind its models
        for seed in (0, 1):  # each model's job in the page itself, with its own bar
            main.get_by_role("link", name=re.compile(rf"train cnn on digits \(seed {seed}")).first.wait_for()
        main.locator('[data-testid="stProgress"]').nth(2).wait_for(timeout=SLOW)  # the stitch's and one per model
        _shot(page, "demo", waiting)
        page.locator('[data-testid="stMetric"]', has_text="Stitched accuracy").first.wait_for(timeout=SLOW)
        with capsys.disabled():
            print(f"\n[e2e] classroom demo: {time.monotonic() - started:.1f} s from click to result card")
        expect(page.get_by_text("Waiting for its models to train")).to_have_count(0, timeout=30_000)
        accuracy = _metric(page, "Stitched accuracy")
        assert re.fullmatch(r"\d+\.\d%", accuracy) and float(accuracy[:-1]) > 80, accuracy
        page.get_by_text("Training curve").first.wait_for()
        page.locator(".js-plotly-plot").nth(1).wait_for(timeout=30_000)  # charts can draw a moment apart
        assert "run=" in page.url
        other = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()  # the link, elsewhere
        open_app(other, page.url)
        other.locator('[data-testid="stMetric"]', has_text="Stitched accuracy").first.wait_for(timeout=60_000)
        assert _metric(other, "Stitched accuracy") == accuracy
        other.context.close()
    page.context.close()
