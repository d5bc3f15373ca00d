"""Input its models cannot run is refused before any store row is written (issue: failed-validation runs
cluttered Home and Results).  Through run_experiment (the CLI's path) and the job runner (the app's)."""

from __future__ import annotations

import pytest

from stitchcore.errors import AdapterError, CutError, StitchError
from stitchcore.experiments import check_spec, run_experiment
from stitchcore.jobs import JobRunner
from stitchcore.experiments.lm import DepthSpec, LMStitchSpec, MergeSpec
from stitchcore.experiments.matrix import MatrixSpec
from stitchcore.experiments.similarity import SimilaritySpec
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.sweep import SweepSpec
from stitchcore.store import Store, run_id_for
from tests.lm_helpers import train_tiny


def bad_specs(refs: list[str]) -> dict[str, object]:
    """One spec per kind with a cut name neither model has."""
    a, b = refs
    return {
        "stitch": StitchSpec(a=a, b=b, cut_a="blok2", cut_b="block2"),
        "matrix": MatrixSpec(a, b, senders=("block1", "blok2")),
        "similarity": SimilaritySpec(a, b, receivers=("fc9",)),
        "sweep": SweepSpec(a, b, positions=("block1", "blok2")),
    }


@pytest.mark.parametrize("kind", ["stitch", "matrix", "similarity", "sweep"])
def test_a_bad_cut_is_refused_and_nothing_is_stored(trained_store, kind):
    store, refs = trained_store
    spec = bad_specs(refs)[kind]
    before = len(store.list_runs())
    with pytest.raises(CutError, match="did you mean|close|cuts run from|its cuts are"):
        check_spec(kind, spec, store)
    with pytest.raises(CutError):
        run_experiment(kind, spec, store)
    assert store.lookup(run_id_for(kind, spec.to_dict())) is None and len(store.list_runs()) == before


def test_the_job_runner_refuses_at_submit(trained_store):
    store, refs = trained_store
    with JobRunner(store, devices=["cpu"], cpu_workers=1, cpu_threads=1) as runner:
        for kind, spec in bad_specs(refs).items():
            with pytest.raises(CutError):
                runner.submit(kind, spec)
            assert store.lookup(run_id_for(kind, spec.to_dict())) is None
        assert runner.list() == []


# -- language models: positions and block ranges are checked before anything is stored -----------


@pytest.fixture(scope="module")
def lm_pair(tmp_path_factory):
    """A store with two tiny 2-block char-GPTs (width 32) and one of width 16."""
    store = Store(tmp_path_factory.mktemp("refusals-lm"))
    refs = [train_tiny(store, 0), train_tiny(store, 1), train_tiny(store, 2, n_embd=16)]
    yield store, refs
    store.close()


def bad_lm_specs(refs: list[str]) -> list[tuple[str, object, type, str]]:
    """(kind, spec, error type, message pattern) of LM specs their 2-block models cannot run."""
    a, b, narrow = refs
    return [
        ("merge", MergeSpec(a=a, b=b, start=1, end=5), CutError, r"block range \[1, 5\) is not within"),
        ("merge", MergeSpec(a=a, b=narrow, start=1), AdapterError, "widths must be equal"),
        ("lmstitch", LMStitchSpec(a=a, b=b, cut_a=7), CutError, "stitch positions must be"),
        ("lmstitch", LMStitchSpec(a=a, b=narrow, cut_a=1, head="a"), AdapterError, "widths must be equal"),
        ("lmdepth", DepthSpec(a=a, b=b, splits=(0, 9)), CutError, r"splits \[9\] are outside 0..2"),
        ("lmdepth", DepthSpec(a=a, b=narrow, modes=("merge",)), StitchError, "nothing to run"),
        ("lmstitch", LMStitchSpec(a=a, b="zoo:cnn-digits-s0", cut_a=1), StitchError, "not in the store|not a language"),
    ]


@pytest.mark.parametrize("case", range(7))
def test_a_bad_lm_spec_is_refused_and_nothing_is_stored(lm_pair, case):
    store, refs = lm_pair
    kind, spec, error, pattern = bad_lm_specs(refs)[case]
    before = len(store.list_runs())
    with pytest.raises(error, match=pattern):
        check_spec(kind, spec, store)
    with pytest.raises(error, match=pattern):
        run_experiment(kind, spec, store)
    assert store.lookup(run_id_for(kind, spec.to_dict())) is None and len(store.list_runs()) == before


def test_good_lm_specs_pass_their_checks(lm_pair):
    store, (a, b, narrow) = lm_pair
    for kind, spec in (("merge", MergeSpec(a=a, b=b, start=1)), ("lmstitch", LMStitchSpec(a=a, b=narrow, cut_a=1)),
                       ("lmdepth", DepthSpec(a=a, b=narrow, modes=("merge", "stitch")))):  # merge curves skipped
        check_spec(kind, spec, store)


def test_the_job_runner_refuses_lm_specs_at_submit(lm_pair):
    store, refs = lm_pair
    with JobRunner(store, devices=["cpu"], cpu_workers=1, cpu_threads=1) as runner:
        for kind, spec, error, _ in bad_lm_specs(refs):
            with pytest.raises(error):
                runner.submit(kind, spec)
        assert runner.list() == []
