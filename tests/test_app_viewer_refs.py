"""Viewer mode opens only what the store holds, on every page: a link or the ref box naming a hub model or a
server path (a model file, an image folder) is refused in one line, and nothing outside the store is read."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import ui
from tests.conftest import ROOT

PAGES = {"stitch": "views/stitch.py", "similarity": "views/similarity.py", "assemble": "views/assemble.py"}
OUTSIDE = {"a": "timm:resnet18?pretrained=false", "b": "file:/etc/hostname?arch=zoo:cnn"}


@pytest.fixture
def loads(monkeypatch):
    """Every ref a page loads (ui.resources -> stitchcore's load_model)."""
    seen: list[str] = []
    real = ui.resources.load_model

    def record(ref, store=None):
        seen.append(str(ref))
        return real(ref, store=store)

    monkeypatch.setattr(ui.resources, "load_model", record)
    return seen


@pytest.mark.parametrize("page", list(PAGES))
def test_a_viewer_link_to_a_hub_model_or_a_server_file_is_refused(app, monkeypatch, loads, page):
    monkeypatch.setenv("STITCHLAB_VIEWER", "1")
    at = AppTest.from_file(str(ROOT / PAGES[page]), default_timeout=120)
    at.query_params.update(OUTSIDE)
    at.run()
    assert not at.exception
    said = " ".join(e.value for e in at.error)
    assert "viewer mode opens only models in the store" in said, said
    assert not [r for r in loads if not r.startswith("zoo:")], loads  # nothing from outside the store was read


def test_a_viewer_still_opens_the_store_s_models_and_a_server_image_folder_is_refused(app, monkeypatch, tmp_path):
    monkeypatch.setenv("STITCHLAB_VIEWER", "1")
    at = AppTest.from_file(str(ROOT / PAGES["stitch"]), default_timeout=120)
    at.query_params.update({"a": "zoo:cnn-digits-s0", "b": "zoo:cnn-digits-s1", "dataset": f"imagefolder:{tmp_path}"})
    at.run()
    assert not at.exception
    said = " ".join(e.value for e in at.error)
    assert "viewer mode reads only the built-in datasets" in said and "loading zoo" not in said, said
    assert ui.viewer_ref("zoo:cnn-digits-s0") == "zoo:cnn-digits-s0"
