"""Adapters as Hub artifacts (issue 41, item 6): a stitch run's adapter saved with huggingface_hub's
PyTorchModelHubMixin (weights, config, model card) to a local folder, loaded back, and scored again to its run's
stitched accuracy; push_to_hub refused offline with what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import stitchcore
from stitchcore.errors import StitchError

A, B = "zoo:cnn-digits-s0", "zoo:cnn-digits-s1"


@pytest.fixture
def store_root(trained_copy) -> Path:
    return trained_copy


def test_a_saved_adapter_loads_back_with_its_card_and_gives_its_runs_accuracy(store_root, tmp_path):
    made = stitchcore.stitch(A, B, "block1", "block2", epochs=2, init="random", store=store_root, progress="never")
    folder = made.save_adapter(tmp_path / "adapter")
    assert {"config.json", "model.safetensors", "README.md"} <= {p.name for p in folder.iterdir()}
    config = json.loads((folder / "config.json").read_text())
    assert config["run_id"] == made.run_id and config["spec"]["a"] == A and config["cut_b"]["name"] == "block2"
    assert config["metrics"]["accuracy_ci"] == made.summary["accuracy_ci"]
    card = (folder / "README.md").read_text()
    assert made.run_id in card and "block1" in card and "95% interval" in card and "library_name: stitchlab" in card
    loaded = stitchcore.load_adapter(folder)
    assert not loaded.training and loaded.run_id == made.run_id
    assert loaded.accuracy(store=store_root) == pytest.approx(made.summary["accuracy"], abs=1e-6)
    other = stitchcore.stitch(A, B, "block1", "block2", epochs=2, init="random", seed=9, store=store_root,
                              progress="never")  # another adapter: its own weights, its own run's accuracy
    reloaded = stitchcore.load_adapter(other.save_adapter(tmp_path / "other"))
    assert reloaded.run_id == other.run_id != made.run_id
    assert not all(torch.equal(x, y) for x, y in zip(reloaded.state_dict().values(), loaded.state_dict().values()))
    assert reloaded.accuracy(store=store_root) == pytest.approx(other.summary["accuracy"], abs=1e-6)


def test_what_cannot_be_saved_loaded_or_pushed_says_why(store_root, tmp_path, monkeypatch):
    matrix = stitchcore.matrix(A, B, senders=("block1",), receivers=("block1",), store=store_root, progress="never")
    with pytest.raises(StitchError, match="only a finished stitch run has an adapter to save"):
        matrix.save_adapter(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(StitchError, match="holds no saved adapter"):
        stitchcore.load_adapter(tmp_path / "empty")
    made = stitchcore.stitch(A, B, "block1", "block1", epochs=0, store=store_root, progress="never")
    loaded = stitchcore.load_adapter(made.save_adapter(tmp_path / "a"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(StitchError, match="offline .*huggingface-cli upload"):
        loaded.push_to_hub("someone/stitch-adapter")
