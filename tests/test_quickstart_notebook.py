"""examples/quickstart.ipynb (issue 41, item 4), executed top to bottom by a real Jupyter kernel (nbclient) over a
fresh store: no cell fails, every figure cell shows a figure, and the numbers its last cell prints are the runs
the store now holds, in the ranges these digit CNNs reach."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from mlflow.tracking import MlflowClient
from nbclient import NotebookClient

from stitchcore.store.results import Store

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"


def test_the_committed_notebook_holds_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code")


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> tuple[nbformat.NotebookNode, Path]:
    store = tmp_path_factory.mktemp("quickstart-store")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    env = {**os.environ, "STITCHLAB_STORE": str(store), "STITCHLAB_JOB_THREADS": "1", "PYTHONPATH": str(ROOT)}
    here = tmp_path_factory.mktemp("quickstart-cwd")  # the notebook's folder: its mlruns/ goes there
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(here)}})
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the kernel is started with this process's environment
    try:
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return nb, store, here


def test_every_cell_runs_and_every_figure_cell_shows_a_figure(executed):
    nb, _, _ = executed
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(o.output_type != "error" for c in code for o in c.outputs)
    assert not any("Warning" in o.get("text", "") for c in code for o in c.outputs)  # no library warns at a user
    figures = [c for c in code if c.source.rstrip().endswith(".figure()")]
    assert len(figures) == 3
    for cell in figures:
        data = next(o.data for o in cell.outputs if o.output_type in ("execute_result", "display_data"))
        assert "application/vnd.plotly.v1+json" in data or "text/html" in data


def test_its_numbers_are_the_stored_runs(executed):
    nb, store_root, here = executed
    printed = json.loads(nb.cells[-1].outputs[0].text)
    with Store(store_root) as store:
        for run_id in [*printed["models"], printed["stitch"], printed["matrix"], printed["sweep"]]:
            assert store.lookup(run_id).status == "done"
        assert store.lookup(printed["stitch"]).summary["accuracy"] == printed["stitched"]
    assert all(acc > 0.9 for acc in printed["accuracy"])  # two digit CNNs
    assert 0.5 < printed["stitched"] <= 1.0
    assert all(0.7 < d <= 1.0 for d in printed["diagonal"])  # a cut into the same cut of a twin stitches well
    links = next(c for c in nb.cells if c.source.startswith("print(stitch.link())")).outputs[0].text.splitlines()
    assert links[0].endswith(f"/results?run={printed['stitch']}") and links[1].startswith("stitchcore.stitch(")
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 reads a folder store only when asked
    client = MlflowClient((here / "mlruns").resolve().as_uri())  # found in MLflow, with MLflow's own client
    logged = client.search_runs([client.get_experiment_by_name("stitchlab").experiment_id])
    assert sorted(r.data.tags["stitchlab.run_id"] for r in logged) == sorted(
        [*printed["models"], printed["stitch"], printed["matrix"], printed["sweep"]])
