"""Trait metrics: parsing, canonical keys, values on hand-made logits."""

from __future__ import annotations

import pytest
import torch

from stitchcore.errors import DataError, StitchError
from stitchcore.measures.traits import check_classes, compute, metric_dataset, parse_metric

# 4 examples, 3 classes: predictions 0, 2, 2, 1 for labels 0, 1, 2, 1
LOGITS = torch.tensor([[3.0, 0, 0], [0, 0, 3.0], [0, 0, 3.0], [0, 3.0, 0]])
LABELS = torch.tensor([0, 1, 2, 1])


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("accuracy", "accuracy", 0.75),
        ("class_acc:1", "class_acc:1", 0.5),
        ("class_acc: 2,0", "class_acc:0,2", 1.0),
        ("confusion:1->2", "confusion:1->2", 0.5),
        ("CONFUSION:2->1", "confusion:2->1", 0.0),
    ],
)
def test_metric_values_on_hand_made_logits(text, key, value):
    m = parse_metric(text)
    assert m.key == key and parse_metric(m.key) == m  # canonical spelling round-trips
    assert compute(m, LOGITS, LABELS) == value


def test_absent_class_gives_none_and_unknown_class_is_refused():
    assert compute(parse_metric("confusion:0->1"), LOGITS[1:], LABELS[1:]) is None
    with pytest.raises(StitchError, match="classes 0..2"):
        check_classes(parse_metric("class_acc:7"), 3)


def test_bad_metrics_name_the_grammar():
    with pytest.raises(StitchError, match="class_acc:3"):
        parse_metric("recall")
    with pytest.raises(StitchError, match="one class"):
        parse_metric("confusion:3->3")


def test_two_cue_metrics_read_their_variant():
    assert metric_dataset(parse_metric("blackout:left"), "twocue-digits") == "twocue-digits-blackleft"
    assert metric_dataset(parse_metric("decor:right"), "twocue-digits|drop3") == "twocue-digits-decorright|drop3"
    assert metric_dataset(parse_metric("class_acc:3"), "digits") == "digits"
    assert parse_metric("blackout:right").label == "accuracy, right half black"
    with pytest.raises(DataError, match="twocue-digits"):
        metric_dataset(parse_metric("blackout:left"), "digits")
