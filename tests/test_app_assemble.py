"""The Assemble page through AppTest: pick parts and recipes, launch, see the figures, open the permalink; a link
fills the form from the declared fields (ui.spec_form) and holds what it cannot use, with a note."""

from __future__ import annotations

import os

import pytest
from streamlit.testing.v1 import AppTest

import ui
from tests.conftest import ROOT, copy_store


@pytest.fixture(autouse=True)
def one_torch_thread(monkeypatch):
    """One thread per job, as on the shared 2-core machine (see test_app_traits)."""
    monkeypatch.setattr(os, "cpu_count", lambda: 1)


@pytest.fixture
def app(tmp_path, monkeypatch, family_store, fresh_app_state):
    """An AppTest of app.py over a copy of the family store (the digit CNNs, a ViT and a Swin)."""
    store, _, _ = family_store
    copy_store(store.root, tmp_path / "store")
    monkeypatch.setenv("STITCHLAB_STORE", str(tmp_path / "store"))
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)


def _page(at: AppTest) -> AppTest:
    return at.run().switch_page("views/assemble.py").run()


def test_launch_a_small_assembly_and_open_its_permalink(family_store, app):
    _, refs, _ = family_store
    at = app
    at.query_params.update({"a": refs["cnn"], "b": refs["vit"]})
    _page(at)
    assert not at.exception and not at.error
    assert at.multiselect(key="asm_senders").value == ["block1", "block2"]  # A's map cuts (its vectors: probes)
    assert at.multiselect(key="asm_adapters").value == ["linear", "linear_relu", "conv3x3_relu", "bottleneck"]
    assert "identity" not in at.multiselect(key="asm_adapters").options  # a merge adds no adapter
    assert "no downsample" in at.multiselect(key="asm_resample").options
    at.multiselect(key="asm_senders").set_value(["block2"]).run()
    at.multiselect(key="asm_receivers").set_value(["blocks.1", "norm"]).run()
    at.multiselect(key="asm_adapters").set_value(["linear"]).run()
    at.multiselect(key="asm_resample").set_value(["bilinear"]).run()
    at.number_input(key="asm_epochs").set_value(2).run()
    at.number_input(key="asm_max_train").set_value(300).run()
    assert any("1 × 2 cut pairs × 1 recipes = 2 networks" in c.value for c in at.caption)
    at.button(key="asm_launch").click().run()
    run_id = at.query_params["run"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    assert ui.get_runner().wait(run_id, timeout=180).state == "done"
    at.run()
    assert not at.exception and not at.error
    # accuracy vs FLOPs, the recipes compared, one heat map per recipe
    assert len(at.get("plotly_chart")) == 3
    # every network in a table: accuracy and penalty with their 95% intervals, the adapter's size beside the MACs
    (table,) = at.dataframe
    columns = list(table.value.columns)
    assert {"accuracy 95% CI", "penalty 95% CI"} <= set(columns)
    assert columns[columns.index("MACs") + 1] == "adapter params"
    assert len(table.value) == 2 and all(ci.startswith("[") for ci in table.value["accuracy 95% CI"])
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    fresh.query_params["run"] = run_id
    _page(fresh)
    assert not fresh.exception and len(fresh.get("plotly_chart")) == 3
    assert fresh.multiselect(key="asm_receivers").value == ["blocks.1", "norm"]  # the form is the run's
    assert fresh.multiselect(key="asm_adapters").value == ["linear"] and fresh.number_input(key="asm_epochs").value == 2
    fresh.button(key="asm_launch").click().run()  # the same choices: the same run
    again = fresh.query_params["run"]
    assert (again[0] if isinstance(again, list) else again) == run_id and not fresh.exception


def test_the_form_says_why_launch_is_off(family_store, app):
    _, refs, _ = family_store
    app.query_params.update({"a": refs["cnn"], "b": refs["swin"]})
    at = _page(app)
    at.multiselect(key="asm_adapters").set_value([]).run()
    assert at.button(key="asm_launch").disabled
    assert any("pick at least one adapter kind" in c.value for c in at.caption)


def test_a_link_fills_the_form_and_holds_what_it_cannot_use(family_store, app):
    """Any declared field in the URL fills the form; a value outside what the form offers is held (the default,
    or the items it does offer) and said above the form."""
    _, refs, _ = family_store
    app.query_params.update({"a": refs["cnn"], "b": refs["vit"], "adapters": "linear", "epochs": "3",
                             "senders": "block2", "resample": "no_downsample"})  # fmt: skip
    at = _page(app)
    assert not at.exception and not at.error and not at.warning
    assert (at.selectbox(key="asm_pick_a").value, at.selectbox(key="asm_pick_b").value) == (refs["cnn"], refs["vit"])
    assert at.multiselect(key="asm_adapters").value == ["linear"] and at.number_input(key="asm_epochs").value == 3
    assert at.multiselect(key="asm_senders").value == ["block2"]
    assert at.multiselect(key="asm_resample").value == ["no_downsample"]
    assert at.multiselect(key="asm_norm").value == ["both"]  # left out of the link: today's default
    assert any(c.value.startswith("1 × ") and " × 1 recipes = " in c.value for c in at.caption)
    at.query_params.update({"adapters": "nope", "norm": "both,sideways", "epochs": "0"})
    at.run()
    assert not at.exception
    (warning,) = at.warning
    assert "adapters='nope'" in warning.value and "'sideways'" in warning.value and "epochs=0" in warning.value
    assert at.multiselect(key="asm_adapters").value == ["linear", "linear_relu", "conv3x3_relu", "bottleneck"]
    assert at.multiselect(key="asm_norm").value == ["both"] and at.number_input(key="asm_epochs").value == 1
    assert not at.button(key="asm_launch").disabled
