"""The Stitch form keeps what the user set: no rerun changes a value the user did not change (issue 24, item 1).

A run in which the form is not drawn (model B switched to a typed ref: for a moment there is no B, then an
uncached model loads) used to drop every field's value: Epochs went back to its default and Launch ran that.
"""

from __future__ import annotations

from tests.e2e.conftest import open_app


def _settle(page) -> None:
    page.wait_for_timeout(700)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=180_000)


def _launch_line(page) -> str:
    line = page.get_by_text("Launch runs A[")
    line.wait_for(timeout=180_000)
    return line.inner_text()


def test_form_values_survive_a_model_switch_to_an_uncached_ref(trained_url, page):
    open_app(page, f"{trained_url}/stitch")
    page.get_by_text("Adapter and training").click()
    epochs = page.get_by_role("spinbutton", name="Adapter training epochs")
    epochs.fill("3")
    epochs.press("Enter")
    _settle(page)
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Optimizer").click()
    page.get_by_role("option", name="sgd").click()
    _settle(page)
    assert "sgd lr 0.01 · 3 epochs" in _launch_line(page)

    # B becomes a typed ref: one run draws no form (no B yet), the next loads a model this server never loaded
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Model B").click()
    page.get_by_role("option", name="other (type a model ref)…").click()
    _settle(page)
    ref = page.get_by_label("Model B ref")
    ref.fill("timm:resnet18?num_classes=10&pretrained=false")
    ref.press("Enter")
    _settle(page)
    if not page.get_by_role("spinbutton", name="Adapter training epochs").is_visible():
        page.get_by_text("Adapter and training").click()
    assert page.get_by_role("spinbutton", name="Adapter training epochs").input_value() == "3"
    line = _launch_line(page)
    assert "sgd lr 0.01 · 3 epochs" in line, line
    assert "timm" not in line  # the line names the settings; the models are above it
