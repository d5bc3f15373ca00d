""""Copy as Python" and "Copy as CLI" (issue 41, item 3; issue 40's contract): every stored run of old code (the v1
fixture store) and a run of each kind made today goes to the command line a run's view shows, and that line, run
through the CLI's own verb (stopped where it would start the run), asks for the very same run id."""

from __future__ import annotations

from pathlib import Path

import pytest

from stitchcore.cli import assemble, lm, matrix, models, stitch, sweep, transfer
from stitchcore.cli.main import build_parser, main
from stitchcore.cli.reproduce import command_argv, command_line
from stitchcore.errors import StitchError
from stitchcore.experiments import list_experiments, spec_from_record
from stitchcore.experiments.lm import DepthSpec, LMStitchSpec, MergeSpec
from stitchcore.params import build_spec
from stitchcore.store.records import run_id_for
from stitchcore.store.results import Store
from tests.conftest import copy_store

ROOT = Path(__file__).resolve().parents[1]
A, B = "zoo:cnn-digits-s0-3a5c8f", "zoo:cnn-digits-s1-d927a0"  # the v1 store's two digit CNNs


class Asked(BaseException):
    """Raised where the verb would start its run: carries (kind, spec)."""


@pytest.fixture
def v1(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "v1"
    copy_store(ROOT / "tests" / "fixtures" / "store_v1", root)

    def asked(kind, spec, *args, **kwargs):
        raise Asked(kind, spec)

    for module in (assemble, lm, matrix, models, stitch, sweep, transfer):
        monkeypatch.setattr(module, "run", asked)
    return root


def _asked_by(argv: list[str], root: Path) -> tuple[str, object]:
    with pytest.raises(Asked) as stopped:
        main([*argv, "--store", str(root), "--quiet"])
    return stopped.value.args


def test_every_stored_run_of_old_code_goes_to_a_command_line_that_asks_for_its_run_id(v1):
    with Store(v1) as store:
        records = [r for r in store.list_runs() if r.status == "done"]
    assert len({r.kind for r in records}) >= 7
    for rec in records:
        argv = command_argv(rec.kind, spec_from_record(rec))
        kind, spec = _asked_by(argv, v1)
        assert (kind, run_id_for(kind, spec.to_dict())) == (rec.kind, rec.id), (rec.kind, argv)


@pytest.mark.parametrize("kind", sorted(list_experiments()))
def test_a_run_of_every_kind_made_today_goes_to_a_command_line_and_back(v1, kind):
    specs = {
        "zoo": build_spec("zoo", {"arch": "swin", "optimizer": "sgd", "seed": 3}),
        "stitch": build_spec("stitch", {"a": A, "b": B, "cut_a": "block1", "cut_b": "block2", "epochs": 2,
                                        "adapter": {"init": "random"}, "keep": "best"}),
        "matrix": build_spec("matrix", {"a": A, "b": B, "mode": "trained", "epochs": 2, "controls": True}),
        "similarity": build_spec("similarity", {"a": A, "b": B, "measure": "rsa", "senders": ("block1",)}),
        "sweep": build_spec("sweep", {"a": A, "b": B, "positions": ("block1", "fc1"), "epochs": 2}),
        "assemble": build_spec("assemble", {"a": A, "b": B, "senders": ("block1",), "receivers": ("block2",),
                                            "kinds": ("linear",), "epochs": 1}),
        "merge": MergeSpec(a="zoo:gpt-x", b="zoo:gpt-y", start=1, end=2, head="b", embed="b", eval_windows=16),
        "lmstitch": LMStitchSpec(a="zoo:gpt-x", b="zoo:gpt-y", cut_a=1, cut_b=2, head="a", head_at=3, steps=50,
                                 until="steps", mlp_hidden=16),
        "lmdepth": DepthSpec(a="zoo:gpt-x", b="zoo:gpt-y", modes=("stitch",), heads=("a", "b"), heatmap=True,
                             steps=30, start="init"),
        "transfer": build_spec("transfer", {"a": A, "b": B, "cut_a": "block1", "cut_b": "block2", "max_test": 300,
                                            "seed": 4}),
    }  # fmt: skip
    spec = specs[kind]
    argv = command_argv(kind, spec)
    if kind in ("merge", "lmstitch", "lmdepth"):  # read back without loading the (absent) models: positions
        made_kind, made = lm._specs(build_parser().parse_args(argv), None)
    else:
        made_kind, made = _asked_by(argv, v1)
    assert made_kind == kind and run_id_for(kind, made.to_dict()) == run_id_for(kind, spec.to_dict()), argv
    assert command_line(kind, spec).startswith(f"python -m stitchcore {' '.join(argv[:1])}")


def test_a_depth_sweep_of_chosen_splits_says_no_command_line_makes_it():
    with pytest.raises(StitchError, match="splits have no flag"):
        command_argv("lmdepth", DepthSpec(a="zoo:gpt-x", b="zoo:gpt-y", splits=(1, 2)))
