"""An uploaded digit CNN, in a real browser: its inputs are pre-filled from zoo:cnn and it scores as trained.

The user's report: a digit CNN uploaded with arch zoo:cnn scored 54% instead of 97% (mean 0 / std 1, no
dataset).  Now the form shows digits' dataset, mean and std before use, and the inspected model's
accuracy is the trained model's.
"""

from __future__ import annotations

import torch

from stitchcore.models.sources import load_model
from tests.e2e.conftest import open_app


def _metric(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]', has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text()


def test_uploaded_digit_cnn_gets_the_zoo_inputs_and_its_accuracy(app_url, page, trained_store, tmp_path):
    store, refs = trained_store
    zoo = load_model(refs[0], store=store)
    stored = store.lookup(zoo.meta["run_id"]).summary["accuracy"]
    path = tmp_path / "digit-cnn.pt"
    torch.save(zoo.model.state_dict(), path)  # a plain state dict: no arch, no preprocessing recorded

    open_app(page, f"{app_url}/models")
    page.get_by_text("Upload a checkpoint").click()
    page.locator('[data-testid="stFileUploader"] input[type=file]').set_input_files(str(path))
    arch = page.get_by_role("textbox", name="Checkpoint architecture")
    arch.fill("zoo:cnn")
    arch.press("Enter")

    mean = page.get_by_role("textbox", name="Mean")
    mean.wait_for(timeout=60_000)
    assert page.get_by_role("combobox", name="Trained on (dataset)").input_value() == "digits"
    assert mean.input_value() == "0.30527535"
    assert page.get_by_role("textbox", name="Std").input_value() == "0.37584367"
    assert page.get_by_role("textbox", name="Size").input_value() == "8"
    page.get_by_text("Pre-filled with the defaults of").wait_for()
    ref = page.locator('[data-testid="stCode"]').first.inner_text().strip()
    assert "?arch=zoo:cnn&dataset=digits&mean=0.30527535&size=8&std=0.37584367" in ref, ref

    page.get_by_role("button", name="Load upload").click()
    page.locator('[data-testid="stMetric"]', has_text="Base accuracy").first.wait_for(timeout=120_000)
    accuracy = _metric(page, "Base accuracy")
    assert accuracy == f"{stored:.1%}", (accuracy, stored)
    assert float(accuracy.rstrip("%")) > 90  # not the ~54% of mean 0 / std 1
    assert page.get_by_role("textbox", name="Model ref").input_value() == ref
    assert "Traceback" not in page.content()
