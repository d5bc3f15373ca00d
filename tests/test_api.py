"""The Python API (issue 41, item 2): one function per run kind with the spec's own fields, sharing the store, the
run ids and the readers of the app and the CLI; background runs; "Copy as Python" calls that make the same run."""

from __future__ import annotations

import dataclasses
import inspect
import io
import time
from pathlib import Path

import plotly.graph_objects as go
import pytest
from streamlit.testing.v1 import AppTest

import stitchcore
from stitchcore.api import python_call, spec_from_call
from stitchcore.api.progress import ProgressBar
from stitchcore.errors import Cancelled, StitchError
from stitchcore.experiments import get_experiment, list_experiments, spec_from_record
from stitchcore.experiments.lm import LMStitchSpec
from stitchcore.params import spec_class
from stitchcore.store.records import run_id_for
from stitchcore.store.results import Store
from tests.conftest import copy_store, run_cli

ROOT = Path(__file__).resolve().parents[1]
A, B = "zoo:cnn-digits-s0", "zoo:cnn-digits-s1"


@pytest.fixture
def store_root(trained_copy) -> Path:
    return trained_copy


def test_every_kind_has_a_function_whose_keywords_are_its_specs_fields():
    functions = {kind: getattr(stitchcore, name) for kind, name in stitchcore.api.reproduce.FUNCTION_OF_KIND.items()}
    assert set(functions) == set(list_experiments())
    for kind, fn in functions.items():
        params = inspect.signature(fn).parameters
        assert {f.name for f in dataclasses.fields(spec_class(kind))} <= set(params), kind
        assert {"store", "background", "progress", "rerun", "device", "threads"} <= set(params), kind
        assert fn.__doc__ and "epochs" in inspect.getdoc(stitchcore.stitch)


def test_a_stitch_from_python_is_the_clis_run_and_the_apps(store_root, capsys, monkeypatch):
    made = stitchcore.stitch(A, B, "block1", "block1", epochs=1, init="random", store=store_root, progress="never")
    assert made.status == "done" and not made.cached
    assert 0.1 < made.summary["accuracy"] <= 1.0
    code, out, _ = run_cli(["stitch", "--a", A, "--b", B, "--cut-a", "block1", "--cut-b", "block1", "--epochs", "1",
                            "--init", "random", "--json"], store_root, capsys)  # fmt: skip
    assert code == 0 and f'"run_id": "{made.run_id}"' in out and '"cached": true' in out
    assert made.link() == f"http://localhost:8501/results?run={made.run_id}"
    monkeypatch.setenv("STITCHLAB_STORE", str(store_root))  # the app over the same store opens it by its link
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("views/results.py")
    at.query_params["run"] = made.run_id
    at.run()
    assert not at.exception
    assert any(made.run_id in c.value for c in at.caption)
    python, cli = (c.value for c in at.code[:2])  # "Copy as Python" and "Copy as CLI" under the run's header
    assert f"store={str(store_root)!r}" in python and f"--store {store_root}" in cli
    again = eval(python.split("run = ", 1)[1], {"stitchcore": stitchcore})  # the copied call, run in a notebook
    assert again.run_id == made.run_id and again.cached
    code, out, _ = run_cli(cli.split()[3:-2] + ["--json"], store_root, capsys)  # the copied line, in a shell
    assert code == 0 and f'"run_id": "{made.run_id}"' in out


def test_a_run_made_elsewhere_comes_back_cached_with_its_figure_and_table(store_root, capsys):
    code, out, _ = run_cli(["matrix", "--a", A, "--b", B, "--json"], store_root, capsys)
    assert code == 0
    again = stitchcore.matrix(A, B, store=store_root)
    assert again.cached and f'"run_id": "{again.run_id}"' in out
    assert isinstance(again.figure(), go.Figure)
    table = again.to_pandas()
    assert "block1" in table.index and "block1" in table.columns  # senders by receivers, as the heat map
    assert 0.0 <= float(table.loc["block1", "block1"]) <= 1.0
    listed = stitchcore.runs(store=store_root).to_pandas()
    assert {"matrix", "zoo"} <= set(listed["kind"]) and len(listed) == 3


def test_a_field_the_kind_lacks_is_refused_with_the_close_ones(store_root):
    with pytest.raises(StitchError, match=r"a stitch has no field 'epoch' \(did you mean epochs\?\)"):
        stitchcore.stitch(A, B, "block1", "block1", epoch=2, store=store_root)
    with pytest.raises(StitchError, match="epochs"):  # a value the spec refuses names its field
        stitchcore.stitch(A, B, "block1", "block1", epochs=-1, store=store_root)
    with pytest.raises(TypeError, match="both by position and by name"):
        stitchcore.stitch(A, B, "block1", "block1", cut_a="block2", store=store_root)
    assert Store(store_root).list_runs("stitch") == []  # nothing stored


def test_copy_as_python_makes_the_same_run_id_for_every_stored_run_of_old_code(tmp_path):
    root = tmp_path / "v1"
    copy_store(ROOT / "tests" / "fixtures" / "store_v1", root)
    with Store(root) as store:
        records = [r for r in store.list_runs() if r.status == "done"]
        assert {r.kind for r in records} >= set(list_experiments()) - {"lmstitch", "assemble", "transfer"}
        for rec in records:
            call = python_call(rec.kind, spec_from_record(rec))
            spec = eval(call, {"stitchcore": _Capture(rec.kind)})  # the call's arguments, read as the API reads them
            assert run_id_for(rec.kind, spec.to_dict()) == rec.id, (rec.kind, call)
    lm = LMStitchSpec(a="zoo:gpt-a", b="zoo:gpt-b", cut_a=1, cut_b=2, steps=40, until="steps")
    call = python_call("lmstitch", lm)
    assert call.startswith("stitchcore.lmstitch('zoo:gpt-a', 'zoo:gpt-b', 1, 2, ") and "until='steps'" in call
    assert eval(call, {"stitchcore": _Capture("lmstitch")}).to_dict() == lm.to_dict()
    old = get_experiment("assemble").from_dict({"a": A, "b": B, "senders": ["block1"], "epochs": 2})  # stored reading
    call = python_call("assemble", old)
    assert "rescale='oneshot'" in call  # the old default written out: the call makes that run, not today's
    assert eval(call, {"stitchcore": _Capture("assemble")}).to_dict() == old.to_dict()


class _Capture:
    """Stands in for the stitchcore module in an eval'd call: the spec the call's arguments make, nothing run."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __getattr__(self, name: str):
        first = stitchcore.api.reproduce.positional(self.kind)
        return lambda *args, **fields: spec_from_call(self.kind, {**dict(zip(first, args, strict=False)), **fields})


def test_a_background_run_reports_progress_and_waits_or_stops(store_root):
    handle = stitchcore.train(arch="cnn", dataset="digits", seed=7, epochs=400, store=store_root, background=True)
    deadline = time.monotonic() + 120
    while handle.progress[0] == 0.0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 0.0 < handle.progress[0] < 1.0 and not handle.done()
    handle.cancel()
    with pytest.raises(Cancelled):
        handle.wait(timeout=120)
    assert Store(store_root).lookup(handle.run_id).status == "cancelled"
    quick = stitchcore.stitch(A, B, "block2", "block2", epochs=0, store=store_root, background=True)
    result = quick.wait(timeout=120)
    assert result.run_id == quick.run_id and result.status == "done" and "done" in repr(quick)


def test_the_progress_bar_draws_only_where_a_person_watches():
    piped = io.StringIO()
    bar = ProgressBar("auto", stream=piped)
    bar(0.5, "half", {"loss": 1.0})
    bar.close()
    assert piped.getvalue() == "" and not bar.enabled
    asked = ProgressBar("always", stream=piped)
    asked(0.25, "a quarter\rFAKE", {})
    asked(0.3, "too soon", {})  # at most one line every few seconds into a log ...
    asked(1.0, "done", {})  # ... and the last one
    assert piped.getvalue() == " 25.0% a quarter\\rFAKE\n100.0% done\n"


def test_cuts_and_load_name_a_models_parts(store_root):
    names = [c.name for c in stitchcore.cuts(A, store=store_root)]
    assert names[:2] == ["block1", "block2"]
    model = stitchcore.load(A, store=store_root)
    assert model.num_classes == 10 and not model.model.training


def test_the_readmes_python_example_runs_as_written(tmp_path, monkeypatch, capsys):
    import re

    text = (ROOT / "README.md").read_text()
    section = re.search(r"^## From Python\n(.*?)(?=^## )", text, flags=re.M | re.S).group(1)
    (code,) = re.findall(r"^```python\n(.*?)^```", section, flags=re.M | re.S)
    monkeypatch.setenv("STITCHLAB_STORE", str(tmp_path / "store"))
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "['block1', 'block2'" in out and "http://localhost:8501/results?run=" in out
    kinds = {r.kind for r in Store(tmp_path / "store").list_runs(status="done")}
    assert kinds == {"zoo", "stitch", "matrix", "similarity"}
