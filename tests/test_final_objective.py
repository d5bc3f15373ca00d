"""Issue 42, part 2: the final-feature objective (Revisiting Stitching in the Foundation Model Era, CVPR 2026): the
stitch is trained so that B's top, fed by the adapter, gives B's own final features (its head's input) on the same
image.  It reads no labels, so it survives labels that are all noise where the task objective does not; it runs in
stitch, sweep and matrix (cached and streamed), and is refused where it means nothing."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from stitchcore.errors import StitchError
from stitchcore.experiments import run_experiment
from stitchcore.experiments.lm.specs import LMStitchSpec
from stitchcore.experiments.matrix import MatrixSpec
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.sweep import SweepSpec
from stitchcore.models.sources import load_model
from stitchcore.stitching.final_features import HeadInput, checked_head, head_of

RANDOM_LINEAR = {"kind": "linear", "norm": "both", "resample": "bilinear", "init": "random"}


@pytest.mark.parametrize("ref", ["torchvision:resnet18?weights=none&num_classes=10", "zoo"])
def test_the_final_features_are_what_the_head_reads(trained_store, ref):
    store, refs = trained_store
    m = load_model(refs[0] if ref == "zoo" else ref, store=store)
    model = m.model.eval()
    x = m.example_input()
    logits, features = HeadInput(model, head_of(model))(x)
    assert torch.equal(logits, model(x))
    assert torch.allclose(head_of(model)(features), logits, atol=1e-5)  # the head applied to them is the output
    alone = HeadInput(model, head_of(model), features_only=True)(x)
    assert torch.equal(alone, features) and features.dim() == 2


def test_a_module_without_a_head_says_so():
    with pytest.raises(StitchError, match="no Linear or conv classifier head"):
        head_of(nn.Sequential(nn.ReLU()))

    class Declared(nn.Module):  # its head declared before the layer that feeds it: the last Linear is not the head
        def __init__(self) -> None:
            super().__init__()
            self.head, self.body = nn.Linear(4, 2), nn.Linear(3, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(torch.relu(self.body(x)))

    with pytest.raises(StitchError, match="last Linear is not what gives its output") as exc:
        checked_head(Declared(), torch.ones(2, 3))
    assert exc.value.fix == {"objective": "task"}
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    assert checked_head(net, torch.ones(2, 3)) is net[2] and net.training  # its mode as it was


def test_the_final_objective_reads_no_labels_where_the_task_objective_learns_the_noise(trained_store):
    """Training labels that are all noise (digits|noise100s1): the task-trained stitch learns them and falls toward
    chance; the final-feature stitch, which never reads them, keeps B's own accuracy within reach."""
    store, refs = trained_store
    common = dict(dataset="digits|noise100s1", epochs=4, noise_control=False, val_fraction=0.0,
                  adapter=RANDOM_LINEAR)  # fmt: skip
    final = run_experiment("stitch", StitchSpec(refs[0], refs[1], "block1", "block1", objective="final", **common),
                           store).record.summary  # fmt: skip
    task = run_experiment("stitch", StitchSpec(refs[0], refs[1], "block1", "block1", objective="task", **common),
                          store).record.summary  # fmt: skip
    assert final["start_accuracy"] < 0.5 < final["accuracy"]  # from a random start, without a label
    assert final["accuracy"] - task["accuracy"] > 0.3
    assert final["history"][-1]["train_loss"] < final["history"][0]["train_loss"]


def test_a_sweep_and_a_matrix_train_on_the_final_objective(trained_store, monkeypatch):
    store, refs = trained_store
    assert "objective" not in SweepSpec(refs[0], refs[1]).to_dict()  # the task: the run id of every sweep before
    sweep = SweepSpec(refs[0], refs[1], positions=("block2",), epochs=2, objective="final", control=False,
                      simplicity=False, noise_control=False, max_train=300, max_test=150)  # fmt: skip
    row = run_experiment("sweep", sweep, store).record.summary
    assert row["positions"] == ["block2"] and row["stitched"]["accuracy"][0] > 0.5
    kw = {"senders": ("block2",), "receivers": ("block2", "fc1"), "mode": "trained", "epochs": 6, "max_train": 300,
          "max_test": 150, "adapter": RANDOM_LINEAR}  # fmt: skip
    cached = run_experiment("matrix", MatrixSpec(refs[0], refs[1], objective="final", **kw), store).record.summary
    assert "activations" not in cached and all(acc > 0.5 for acc in cached["values"][0])
    monkeypatch.setenv("STITCHLAB_ACT_BUDGET_MB", "0.01")  # under the budget: B's final features per drawn batch
    streamed = run_experiment("matrix", MatrixSpec(refs[0], refs[1], objective="final", seed=1, **kw),
                              store).record.summary  # fmt: skip
    assert all(acc > 0.5 for acc in streamed["values"][0])
    with pytest.raises(StitchError, match="a matrix objective"):
        MatrixSpec(refs[0], refs[1], objective="kd", **kw)


def test_the_final_objective_is_refused_where_it_means_nothing():
    with pytest.raises(StitchError, match="B's head runs the top") as exc:
        StitchSpec("zoo:cnn-digits-s0", "zoo:cnn-digits-s0", "block1", "block1", objective="final", head="a",
                   head_cut="fc1")  # fmt: skip
    assert exc.value.fix == {"objective": "task"}
    with pytest.raises(StitchError, match="image stitches"):
        LMStitchSpec(a="zoo:gpt-s0", b="zoo:gpt-s1", objective="final")
