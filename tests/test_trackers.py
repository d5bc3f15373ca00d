"""Experiment trackers (issue 41, item 5): a run logged to a real local MLflow file store and to real TensorBoard
event files, read back with each one's own reader; from the API (``log_to=``) and the CLI (``--log-to``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import stitchcore
from stitchcore.errors import StitchError
from stitchcore.report.trackers import final_metrics, log_run
from stitchcore.store.results import Store
from tests.conftest import run_cli

A, B = "zoo:cnn-digits-s0", "zoo:cnn-digits-s1"


@pytest.fixture
def store_root(trained_copy) -> Path:
    return trained_copy


def _mlflow_runs(folder: Path) -> tuple[MlflowClient, list]:
    client = MlflowClient(folder.resolve().as_uri())
    experiment = client.get_experiment_by_name("stitchlab")
    return client, client.search_runs([experiment.experiment_id])


def test_a_stitch_logged_to_mlflow_reads_back_with_mlflows_client(store_root, tmp_path):
    made = stitchcore.stitch(A, B, "block1", "block1", epochs=2, init="random", store=store_root, progress="never",
                             log_to=f"mlflow:{tmp_path / 'mlruns'}")  # fmt: skip
    client, runs = _mlflow_runs(tmp_path / "mlruns")
    (run,) = runs
    assert run.data.tags["stitchlab.run_id"] == made.run_id and run.info.status == "FINISHED"
    assert run.data.params["adapter.init"] == "random" and run.data.params["epochs"] == "2"
    assert run.data.params["a"] == A and run.data.params["max_train"] == "null"
    stored = Store(store_root).series(made.run_id)["loss"]
    logged = client.get_metric_history(run.info.run_id, "loss")
    assert [(m.step, round(m.value, 6)) for m in logged] == [(s, round(v, 6)) for s, v in stored]  # the curve
    assert run.data.metrics["accuracy"] == pytest.approx(made.summary["accuracy"])
    lo, hi = made.summary["accuracy_ci"]
    assert (run.data.metrics["accuracy_ci_lo"], run.data.metrics["accuracy_ci_hi"]) == pytest.approx((lo, hi))
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert f"stitchlab-{made.run_id}.html" in names and "figures" in names
    figures = {a.path for a in client.list_artifacts(run.info.run_id, "figures")}
    assert {"figures/accuracy.json", "figures/accuracy.csv"} <= figures
    assert made.log_to(f"mlflow:{tmp_path / 'mlruns'}").endswith(run.info.run_id)  # once: found, not logged again
    assert len(_mlflow_runs(tmp_path / "mlruns")[1]) == 1


def test_a_matrix_logged_to_tensorboard_from_the_cli_reads_back_with_tensorboards_reader(store_root, tmp_path, capsys):
    code, out, err = run_cli(["matrix", "--a", A, "--b", B, "--mode", "trained", "--epochs", "1", "--senders",
                              "block1", "--receivers", "block1,fc1", "--log-to", f"tensorboard:{tmp_path / 'tb'}",
                              "--json"], store_root, capsys)  # fmt: skip
    assert code == 0, err
    run_id = next(r.id for r in Store(store_root).list_runs("matrix"))
    folder = tmp_path / "tb" / run_id
    assert f"logged to {folder}" in err
    events = EventAccumulator(str(folder))
    events.Reload()
    scalars = set(events.Tags()["scalars"])
    assert {f"final/{k}" for k in final_metrics(Store(store_root).lookup(run_id).summary)} <= scalars
    assert set(Store(store_root).series(run_id)) <= scalars  # every stored curve
    assert "spec/text_summary" in events.Tags()["tensors"]
    assert (folder / "artifacts" / f"stitchlab-{run_id}.html").is_file()


def test_a_bad_target_or_a_missing_package_is_one_line_before_anything_runs(store_root, capsys, monkeypatch):
    with pytest.raises(StitchError, match=r"log to mlflow:DIR or tensorboard:DIR .* not 'wandb:x'"):
        stitchcore.stitch(A, B, "block1", "block1", store=store_root, log_to="wandb:x")
    code, _, err = run_cli(["stitch", "--a", A, "--b", B, "--cut-a", "block1", "--cut-b", "block1", "--log-to",
                            "nowhere"], store_root, capsys)  # fmt: skip
    assert code == 2 and err.strip().startswith("error: log to mlflow:DIR") and len(err.strip().splitlines()) == 1
    assert Store(store_root).list_runs("stitch") == []
    made = stitchcore.stitch(A, B, "block1", "block1", epochs=0, store=store_root, progress="never")
    monkeypatch.setitem(sys.modules, "mlflow", None)  # not installed
    with pytest.raises(StitchError, match=r"logging to mlflow needs the mlflow package: pip install 'stitchlab\[trackers\]'"):
        log_run(made.record, made.store, f"mlflow:{store_root.parent / 'ml'}")


def test_a_verb_that_makes_no_run_refuses_log_to(store_root, tmp_path, capsys):
    code, _, err = run_cli(["runs", "list", "--log-to", f"tensorboard:{tmp_path}"], store_root, capsys)
    assert code == 2 and "--log-to logs the run a verb makes" in err
    assert not any(tmp_path.glob("*/events.out.tfevents.*"))
