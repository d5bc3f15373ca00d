"""The findings of docs/DESIGN.md: committed JSON files of one shape, verdicts that follow from their intervals,
and a table generated from them (bench/findings_table.py), never edited by hand."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from stitchcore.measures.verdicts import REPRODUCED, VERDICTS, verdict

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ("traits", "bansal", "bansal_mnist5k", "matrix", "assemble", "lm")  # every area over model seeds (issue 39)


def _table_module():
    spec = importlib.util.spec_from_file_location("findings_table", ROOT / "bench" / "findings_table.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["findings_table"] = module
    spec.loader.exec_module(module)
    return module


def _findings(area: str) -> list[dict]:
    return json.loads((ROOT / "bench" / f"findings_{area}.json").read_text())["findings"]


@pytest.mark.parametrize("area", MEASURED)
def test_each_area_commits_findings_of_one_shape(area):
    found = _findings(area)
    assert found, f"findings_{area}.json lists no finding"
    for f in found:
        assert {"claim", "paper", "ours", "baseline", "effect", "verdict", "why", "side"} <= set(f)
        assert {"mean", "ci", "n_seeds"} <= set(f["ours"])
        assert {"name", "mean", "ci"} <= set(f["baseline"])
        assert {"mean", "ci", "n_seeds"} <= set(f["effect"])
        assert f["verdict"] in VERDICTS
        assert f["ours"]["n_seeds"] >= 3, "intervals over three or more model seeds"


@pytest.mark.parametrize("area", MEASURED)
def test_every_verdict_follows_from_its_effect_interval(area):
    for f in _findings(area):
        assert verdict(f["effect"], f["side"], margin=f.get("margin"))[0] == f["verdict"], f["claim"]
        if f["verdict"] == REPRODUCED:  # an interval over >= 3 model seeds on the claimed side of 0
            lo, hi = f["effect"]["ci"]
            assert f["effect"]["n_seeds"] >= 3
            assert lo > 0 if f["side"] == "greater" else hi < 0, f["claim"]


def test_design_holds_exactly_the_generated_table():
    table = _table_module()
    assert not set(MEASURED) & set(table.pending()), "a measured area's JSON is missing or in the old form"
    text = (ROOT / "docs" / "DESIGN.md").read_text()
    inside = text.split(table.START, 1)[1].split(table.END, 1)[0].strip()
    assert inside == table.table().strip(), "regenerate it: python bench/findings_table.py --write"
    rows = [line for line in inside.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(table.findings())  # the header, then one row per finding
