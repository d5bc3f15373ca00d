"""Shared fixtures: a results store with two small digit CNNs trained once per session."""

from __future__ import annotations

import os

import pytest
import torch

# Tiny ops are faster (and timings steadier) on one thread than on two contended ones.
torch.set_num_threads(1)

# Tests never reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

@pytest.fixture(scope="session")
def trained_store(tmp_path_factory):
    """A store holding zoo:cnn-digits-s0 and zoo:cnn-digits-s1 (default recipes, ~1 s each)."""
    from stitchcore.experiments import run_experiment
    from stitchcore.specs import ZooRecipe
    from stitchcore.store import Store

    store = Store(tmp_path_factory.mktemp("store"))
    refs = []
    for seed in (0, 1):
        out = run_experiment("zoo", ZooRecipe(arch="cnn", dataset="digits", seed=seed), store)
        refs.append(out.record.summary["ref"])
    return store, refs
