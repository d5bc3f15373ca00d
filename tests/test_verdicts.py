"""Verdicts are computed from a paired effect's interval over model seeds: every verdict, every side, the
margin, and the sentence that quotes the numbers."""

from __future__ import annotations

import pytest

from stitchcore.measures.intervals import paired_seed_effect
from stitchcore.measures.verdicts import (
    EQUIVALENT,
    NOT_REPRODUCED,
    NOT_SEPARABLE,
    NOT_TESTABLE,
    REPRODUCED,
    VERDICTS,
    verdict,
)


def _effect(lo: float, hi: float, n: int = 4) -> dict:
    return {"mean": round((lo + hi) / 2, 6), "ci": [lo, hi], "n_seeds": n}


@pytest.mark.parametrize("ci, side, margin, expected", [
    ((0.01, 0.05), "greater", None, REPRODUCED),
    ((0.01, 0.05), "less", None, NOT_REPRODUCED),
    ((-0.05, -0.01), "less", None, REPRODUCED),
    ((-0.05, -0.01), "greater", None, NOT_REPRODUCED),
    ((-0.02, 0.04), "greater", None, NOT_SEPARABLE),
    ((-0.02, 0.04), "less", None, NOT_SEPARABLE),
    ((0.0, 0.04), "greater", None, NOT_SEPARABLE),  # touching 0 is containing it
    ((-0.04, 0.0), "less", None, NOT_SEPARABLE),
    ((-0.004, 0.006), "greater", 0.01, EQUIVALENT),
    ((-0.004, 0.006), "less", 0.01, EQUIVALENT),
    ((0.002, 0.006), "greater", 0.01, EQUIVALENT),  # reliably above 0, but by less than matters
    ((-0.004, 0.016), "greater", 0.01, NOT_SEPARABLE),  # 0 inside, reaching past the margin
    ((0.02, 0.06), "greater", 0.01, REPRODUCED),
    ((-0.06, -0.02), "greater", 0.01, NOT_REPRODUCED),
])  # fmt: skip
def test_the_verdict_follows_where_the_interval_lies(ci, side, margin, expected):
    word, why = verdict(_effect(*ci), side, margin=margin)
    assert word == expected
    assert why.startswith("Over 4 model seeds the claim minus its baseline is ") and why.endswith(".")
    assert ". " not in why and "\n" not in why  # one sentence
    assert f"{ci[0]:+.3g}" in why and f"{ci[1]:+.3g}" in why and "95% interval" in why
    if margin is not None and expected in (EQUIVALENT, NOT_SEPARABLE):
        assert f"±{margin:.3g}" in why


def test_fewer_than_three_model_seeds_are_not_testable_whatever_their_mean():
    for claim, baseline in (([0.95, 0.96], [0.50, 0.51]), ([0.9], [0.1])):
        effect = paired_seed_effect(claim, baseline)
        word, why = verdict(effect, "greater")
        assert effect["ci"] is None and word == NOT_TESTABLE
        assert f"Over {len(claim)} model seed" in why and "needs 3 seeds or more" in why


def test_a_verdict_from_seeds_reads_their_paired_interval():
    """The same claim and baseline, three seeds: the claim wins on every seed, so it is reproduced; shift the
    baseline to win on one seed and the interval reaches 0."""
    claim, baseline = [0.92, 0.95, 0.90], [0.88, 0.91, 0.87]
    assert verdict(paired_seed_effect(claim, baseline), "greater")[0] == REPRODUCED
    assert verdict(paired_seed_effect(claim, [0.88, 0.91, 0.93]), "greater")[0] == NOT_SEPARABLE
    assert verdict(paired_seed_effect(baseline, claim), "greater")[0] == NOT_REPRODUCED
    assert set(VERDICTS) == {REPRODUCED, NOT_REPRODUCED, EQUIVALENT, NOT_SEPARABLE, NOT_TESTABLE}


@pytest.mark.parametrize("side, margin, match", [("higher", None, "one of greater, less"),
                                                  ("greater", 0.0, "above 0"), ("less", -0.1, "above 0")])
def test_a_side_or_margin_that_means_nothing_is_refused(side, margin, match):
    with pytest.raises(ValueError, match=match):
        verdict(_effect(0.01, 0.02), side, margin=margin)
