"""Input its models cannot run is refused before any store row is written (issue: failed-validation runs
cluttered Home and Results).  Through run_experiment (the CLI's path) and the job runner (the app's)."""

from __future__ import annotations

import pytest

from stitchcore.errors import CutError
from stitchcore.experiments import check_spec, run_experiment
from stitchcore.experiments.jobs import JobRunner
from stitchcore.experiments.matrix import MatrixSpec
from stitchcore.experiments.similarity import SimilaritySpec
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.store import run_id_for


def bad_specs(refs: list[str]) -> dict[str, object]:
    """One spec per kind with a cut name neither model has."""
    a, b = refs
    return {
        "stitch": StitchSpec(a=a, b=b, cut_a="blok2", cut_b="block2"),
        "matrix": MatrixSpec(a, b, senders=("block1", "blok2")),
        "similarity": SimilaritySpec(a, b, receivers=("fc9",)),
    }


@pytest.mark.parametrize("kind", ["stitch", "matrix", "similarity"])
def test_a_bad_cut_is_refused_and_nothing_is_stored(trained_store, kind):
    store, refs = trained_store
    spec = bad_specs(refs)[kind]
    before = len(store.list_runs())
    with pytest.raises(CutError, match="did you mean|close|cuts run from"):
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
