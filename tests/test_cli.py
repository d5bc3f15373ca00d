"""The CLI contract: one JSON object on stdout, one-line errors, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def cli(*args: str, store) -> subprocess.CompletedProcess:
    """``python -m stitchcore ARGS`` as a real process over ``store``: one per verb family below (a process costs
    ~6 s of imports on 2 cores); the other calls go through :func:`in_process`, the same ``main``."""
    env = {**os.environ, "STITCHLAB_STORE": str(store.root)}
    return subprocess.run(
        [sys.executable, "-m", "stitchcore", *args], check=False, capture_output=True, text=True, env=env,
        timeout=240,
    )


@pytest.fixture
def in_process(monkeypatch, capsys):
    """``cli`` without a process: ``stitchcore.cli.main.main(ARGS)`` with ``$STITCHLAB_STORE`` set, its exit code
    (argparse's SystemExit too) and what it printed, as a CompletedProcess."""
    from stitchcore.cli.main import main

    def run(*args: str, store) -> subprocess.CompletedProcess:
        monkeypatch.setenv("STITCHLAB_STORE", str(store.root))
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["python", "-m", "stitchcore", *args], code, out, err)

    return run


def test_zoo_list_and_cached_train(trained_store, in_process):
    store, refs = trained_store
    p = cli("zoo", "list", "--json", store=store)
    assert p.returncode == 0, p.stderr
    listed = {m["ref"] for m in json.loads(p.stdout)["models"]}
    assert set(refs) <= listed
    p = in_process("zoo", "train", "--arch", "cnn", "--dataset", "digits", "--seed", "0", "--json", store=store)
    out = json.loads(p.stdout)
    assert out["cached"] is True and out["ref"] == "zoo:cnn-digits-s0" and out["accuracy"] > 0.9


def test_cuts_json(trained_store):
    store, refs = trained_store
    p = cli("cuts", refs[0], "--json", store=store)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    names = [c["name"] for c in out["cuts"]]
    assert out["model"] == refs[0]
    assert "block1" in names and "block2" in names
    assert all(set(c) == {"name", "shape", "layout", "depth", "aliases"} for c in out["cuts"])
    assert next(c for c in out["cuts"] if c["name"] == "block1")["aliases"] == ["block1.pool"]
    # the whole model's cost at its input size: multiply-adds (Traft & Cheney's Table 1) and FLOPs (2 per MAC)
    from stitchcore.models.sources import load_model
    from stitchcore.stitching.evaluate import module_flops

    m = load_model(refs[0], store=store)
    assert out["input_shape"] == [1, 8, 8]
    assert out["flops"] == module_flops(m.model, m.example_input(1)) and out["macs"] == out["flops"] // 2 > 0


def test_stitch_json_then_cached(trained_store, in_process):
    store, refs = trained_store
    args = ["stitch", "--a", refs[0], "--b", refs[1], "--cut-a", "fc1", "--cut-b", "fc1", "--init", "lstsq",
            "--epochs", "1", "--json"]
    first = json.loads(cli(*args, store=store).stdout)
    for key in ("run_id", "cached", "accuracy", "base", "penalty", "params", "flops", "seconds"):
        assert key in first
    second = in_process(*args, store=store)
    out = json.loads(second.stdout)
    assert out["cached"] is True and out["accuracy"] == first["accuracy"]
    assert second.stdout.count("\n") == 1, "exactly one JSON object"


@pytest.mark.parametrize(
    "args, needle",
    [
        (["cuts", "tim:resnet18"], "timm:"),
        (["cuts", "file:/nonexistent/model.pt?arch=zoo:cnn"], "/nonexistent/model.pt"),
        (["cuts", "zoo:cnn-digits-s9"], "zoo train"),
        (["runs", "show", "deadbeef"], "runs list"),
    ],
)
def test_bad_input_is_one_line_error(trained_store, in_process, args, needle):
    """In-process: the one line a real process prints is checked in tests/test_cli_bad_inputs.py
    (test_a_real_process_prints_one_line_too) and for ``runs`` in test_a_missing_run_is_one_line_from_a_process."""
    store, _ = trained_store
    p = in_process(*args, store=store)
    assert p.returncode == 2
    lines = [line for line in p.stderr.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], p.stderr


def test_every_command_has_help(capsys):
    from stitchcore.cli.main import COMMANDS, build_parser

    for verb, sub in COMMANDS:
        args = [verb] + ([sub] if sub else []) + ["--help"]
        with pytest.raises(SystemExit) as exit_info:
            build_parser().parse_args(args)
        assert exit_info.value.code == 0 and "usage:" in capsys.readouterr().out, args


def test_matrix_json(trained_store):
    store, refs = trained_store
    args = ["matrix", "--a", refs[0], "--b", refs[1], "--senders", "block2,fc1", "--receivers", "block1,fc1", "--json"]
    p = cli(*args, store=store)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    for key in ("run_id", "senders", "receivers", "values", "metric", "controls", "cached"):
        assert key in out
    assert out["senders"] == ["block2", "fc1"] and out["receivers"] == ["block1", "fc1"]
    assert out["values"][1][0] is None, "vector -> map is skipped, not failed"
    assert out["values"][1][1] > 0.8


def test_a_missing_run_is_one_line_from_a_process(trained_store):
    store, _ = trained_store
    p = cli("runs", "show", "deadbeef", store=store)
    assert p.returncode == 2
    lines = [line for line in p.stderr.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "runs list" in lines[0], p.stderr


def test_similarity_json_with_baseline(trained_store, in_process):
    store, refs = trained_store
    p = cli("similarity", "--a", refs[0], "--b", refs[0], "--senders", "block1,fc1", "--receivers", "block1,fc1",
            "--max-samples", "256", "--batch-size", "64", "--json", store=store)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["measure"] == "cka-linear" and out["n"] == 256
    assert abs(out["values"][0][0] - 1) < 1e-6 and abs(out["values"][1][1] - 1) < 1e-6, "a model with itself"
    assert out["baseline"][0][0] < 0.5, "shuffled inputs are dissimilar"
    again = in_process("similarity", "--a", refs[0], "--b", refs[0], "--senders", "block1,fc1", "--receivers",
                "block1,fc1", "--max-samples", "256", "--batch-size", "64", "--json", store=store)
    assert json.loads(again.stdout)["cached"] is True


# ----------------------------------------------------------------------------- cut aliases (issue 11)


@pytest.fixture(scope="module")
def resnet_store(tmp_path_factory):
    """Two zoo ResNets (blocks 1,1,1,1: ``layer2`` is ``layer2.0``) trained for one epoch."""
    from stitchcore.experiments import run_experiment
    from stitchcore.experiments.zoo import ZooRecipe
    from stitchcore.store.results import Store

    store = Store(tmp_path_factory.mktemp("resnets"))
    refs = [run_experiment("zoo", ZooRecipe(arch="resnet", dataset="digits", seed=s, epochs=1), store).record
            .summary["ref"] for s in (0, 1)]
    return store, refs


def test_stitch_accepts_a_stage_alias_and_stores_the_canonical_cut(resnet_store, in_process):
    from stitchcore.store.results import Store

    store, refs = resnet_store
    base = ["stitch", "--a", refs[0], "--b", refs[1], "--init", "lstsq", "--epochs", "0"]
    p = in_process(*base, "--cut-a", "layer2", "--cut-b", "layer2", "--json", store=store)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["cut_a"]["name"] == out["cut_b"]["name"] == "layer2.0"
    assert out["cut_a_alias"] == out["cut_b_alias"] == "layer2"
    assert "layer2 = layer2.0" in p.stderr
    with Store(store.root) as again:
        assert again.lookup(out["run_id"]).spec["cut_a"] == "layer2.0"  # specs hold canonical names
    p = in_process(*base, "--cut-a", "layer2.0", "--cut-b", "layer2", store=store)  # the same stitch: one run id
    assert p.returncode == 0, p.stderr
    assert "cuts: layer2 = layer2.0" in p.stdout and "cached" in p.stdout
    p = in_process(*base, "--cut-a", "layer7", "--cut-b", "layer2", store=store)
    assert p.returncode == 2 and "no cut 'layer7'" in p.stderr and "close:" in p.stderr


def test_cuts_lists_aliases_and_matrix_resolves_them(resnet_store, in_process):
    store, refs = resnet_store
    p = in_process("cuts", refs[0], store=store)
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("layer2.0 "))
    assert "= layer2, layer2.0.relu2" in line
    p = in_process("matrix", "--a", refs[0], "--b", refs[1], "--senders", "layer1,layer2", "--receivers", "layer2",
            "--max-train", "256", "--max-test", "128", "--json", store=store)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["senders"] == ["layer1.0", "layer2.0"] and out["receivers"] == ["layer2.0"]
    assert out["aliases"] == {"layer1": "layer1.0", "layer2": "layer2.0"}
