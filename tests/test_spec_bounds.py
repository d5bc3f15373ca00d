"""Every count and size a spec takes has a stated upper bound, checked in its constructor (issue 45, item 5), so
the CLI, the app, lessons and the API refuse the same values in one line before anything runs: a billion
adapter seeds allocated ~36 GB before failing, a 2**63 seed overflowed into a failed row, a negative matrix
or LM seed was taken as it was.
"""

from __future__ import annotations

import pytest

from stitchcore.errors import StitchError, StoreError
from stitchcore.experiments.assemble import AssembleSpec
from stitchcore.experiments.lm import DepthSpec, LMStitchSpec, MergeSpec
from stitchcore.experiments.matrix import MatrixSpec
from stitchcore.experiments.similarity import SimilaritySpec
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.experiments.sweep import SweepSpec
from stitchcore.stitching.adapters import AdapterSpec
from stitchcore.store.results import Store

A, B = "zoo:cnn-digits-s0", "zoo:cnn-digits-s1"
LM = {"a": "zoo:gpt-pydoc-s0", "b": "zoo:gpt-pydoc-s1"}


def stitch(**kw):
    return StitchSpec(A, B, "block2", "block2", **kw)


BAD = [  # (build, what the one line says)
    (lambda: stitch(seeds=10**9), r"^seeds must be at most 100 \(got 1000000000\); each seed trains the adapter"),
    (lambda: stitch(seed=2**63), r"^seed must be a whole number 0 \.\. 2147483647 \(got 9223372036854775808\)"),
    (lambda: stitch(split_seed=-1), r"^split_seed \(--split-seed\) must be a whole number 0 \.\. 2147483647"),
    (lambda: stitch(epochs=2**70), r"^epochs must be at most 10000"),
    (lambda: stitch(epochs=2.5), r"^epochs must be a whole number \(got 2\.5\)"),
    (lambda: stitch(batch_size=10**12), r"^batch_size \(--batch-size\) must be at most 65536"),
    (lambda: stitch(max_test=10**30), r"^max_test \(--max-test\) must be at most 1000000000"),
    (lambda: stitch(lr=1e30), r"^lr must be at most 10\.0"),
    (lambda: stitch(adapter=AdapterSpec(kind="lowrank", rank=2**40)), r"^rank must be at most 65536"),
    (lambda: MatrixSpec(A, B, seed=-1), r"^seed must be a whole number 0 \.\. 2147483647 \(got -1\)"),
    (lambda: MatrixSpec(A, B, mode="trained", epochs=10**9), r"^epochs must be at most 10000"),
    (lambda: MatrixSpec(A, B, batch_size=0), r"^batch_size \(--batch-size\) must be at least 1 \(got 0\)"),
    (lambda: SweepSpec(A, B, seed=-1), r"^seed must be a whole number 0 \.\. 2147483647 \(got -1\)"),
    (lambda: SweepSpec(A, B, control_seeds=10**9), r"^control_seeds \(--control-seeds\) must be at most 10000"),
    (lambda: SweepSpec(A, B, sharpness_draws=0), r"^sharpness_draws \(--sharpness-draws\) must be at least 1"),
    (lambda: SimilaritySpec(A, B, max_samples=2**70), r"^max_samples \(--max-samples\) must be at most 1000000000"),
    (lambda: SimilaritySpec(A, B, null_permutations=10**9), r"^null_permutations .*must be at most 10000"),
    (lambda: AssembleSpec(A, B, finetune_epochs=10**9), r"^finetune_epochs \(--finetune-epochs\) must be at most"),
    (lambda: AssembleSpec(A, B, seed=2**70), r"^seed must be a whole number"),
    (lambda: LMStitchSpec(**LM, steps=2**70), r"^steps must be at most 10000000"),
    (lambda: LMStitchSpec(**LM, seed=-1), r"^seed must be a whole number 0 \.\. 2147483647 \(got -1\)"),
    (lambda: LMStitchSpec(**LM, cut_a=2**70), r"^cut_a \(--cut-a\) must be at most 100000 .*no model is that deep"),
    (lambda: LMStitchSpec(**LM, mlp_hidden=2**40), r"^mlp_hidden \(--mlp-hidden\) must be at most 65536"),
    (lambda: DepthSpec(**LM, eval_windows=10**9), r"^eval_windows \(--eval-windows\) must be at most 10000"),
    (lambda: DepthSpec(**LM, splits=(1, -2)), r"^splits\[1\] must be at least 0 \(got -2\)"),
    (lambda: MergeSpec(**LM, start=2**70), r"^start must be at most 100000"),
    (lambda: MergeSpec(**LM, sample_tokens=10**9), r"^sample_tokens \(--sample-tokens\) must be at most 100000"),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_a_spec_refuses_a_count_beyond_its_bound_in_one_line(case):
    build, message = BAD[case]
    with pytest.raises(StitchError, match=message) as info:
        build()
    assert "\n" not in str(info.value)


def test_the_bounds_leave_the_defaults_and_the_app_ranges_alone():
    """What the page offers at its most (views/stitch.py NUMBER_RANGES) still builds, with the same dict."""
    spec = stitch(epochs=500, batch_size=4096, seed=10**6, split_seed=10**6, max_train=10**7, max_test=10**7, seeds=20)
    assert StitchSpec.from_dict(spec.to_dict()) == spec
    for build in (lambda: MatrixSpec(A, B), lambda: SweepSpec(A, B), lambda: SimilaritySpec(A, B),
                  lambda: AssembleSpec(A, B), lambda: LMStitchSpec(**LM), lambda: DepthSpec(**LM),
                  lambda: MergeSpec(**LM)):  # fmt: skip
        build()


def test_the_store_refuses_a_list_limit_sqlite_cannot_hold(tmp_path):
    """``runs list --limit`` with 30 nines overflowed SQLite's 64-bit LIMIT; -1 there means every run."""
    with Store(tmp_path / "store") as store:
        for limit in (10**30, -1, 2.5, True):
            with pytest.raises(StoreError, match=r"^limit must be a whole number 0 \.\. 1000000000"):
                store.list_runs(limit=limit)
        assert store.list_runs(limit=0) == [] and store.list_runs(limit=10**9) == []


@pytest.mark.parametrize("text", ["²", "h.²", "9" * 5000, "h." + "9" * 50, "٣"])
def test_a_residual_position_from_a_link_or_lesson_is_a_cut_error(text):
    """The Language page and lessons pass a link's position straight to parse_position: ``"²".isdigit()`` is
    True, so int() raised ValueError there before; now one CutError line naming the positions."""
    from stitchcore.errors import CutError
    from stitchcore.lm.parts import parse_position

    with pytest.raises(CutError, match=r"no residual cut .*use drop, h\.0 \.\. h\.3 or a position 0\.\.4"):
        parse_position(text, 4)
