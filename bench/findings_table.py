"""The findings table of docs/DESIGN.md, generated from the committed bench/findings_<area>.json files.

    python bench/findings_table.py            # print the table
    python bench/findings_table.py --write    # replace the table in docs/DESIGN.md (between its two markers)

One row per finding: the paper and its claim, the project's value over model seeds (mean and 95% t interval,
n seeds), the baseline that could break the claim, the paired effect and the computed verdict with its reason.
tests/test_findings_table.py checks that DESIGN holds exactly this table and that every verdict follows from its
interval.

>>> row({"paper": "P", "claim": "c", "what": "x", "ours": {"mean": 0.3, "ci": [0.2, 0.4], "n_seeds": 3},
...      "baseline": {"name": "random A", "mean": 0.1, "ci": None, "n_seeds": 3},
...      "effect": {"mean": 0.2, "ci": [0.1, 0.3]}, "verdict": "reproduced", "why": "w."})
'| P: c | x: 0.300 [0.200, 0.400] (3 seeds) | random A: 0.100 | +0.200 [+0.100, +0.300] | reproduced: w. |'
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AREAS = ("traits", "bansal", "bansal_mnist5k", "matrix", "assemble", "lm")  # the table's order (DESIGN's sections)
START, END = "<!-- findings-table:start -->", "<!-- findings-table:end -->"
HEADER = ("| Paper: claim | Project, over model seeds (mean [95% CI]) | Baseline that could break it | "
          "Effect: project − baseline [95% CI] | Verdict (computed) |\n|---|---|---|---|---|")


def _num(v: float | None, signed: bool = False) -> str:
    return "n/a" if v is None else (f"{v:+.3f}" if signed else f"{v:.3f}")


def _ci(ci: list[float] | None, signed: bool = False) -> str:
    return "" if not ci else f" [{_num(ci[0], signed)}, {_num(ci[1], signed)}]"


def _cell(text: str) -> str:
    return str(text).replace("|", "/").replace("\n", " ")


def row(f: dict) -> str:
    """One markdown row of a finding (bench/_findings.finding's dict)."""
    ours, base, eff = f["ours"], f["baseline"], f["effect"]
    what = f"{f['what']}: " if f.get("what") else ""
    n = ours.get("n_seeds")
    return (f"| {_cell(f['paper'])}: {_cell(f['claim'])} | {_cell(what)}{_num(ours['mean'])}{_ci(ours['ci'])}"
            f"{f' ({n} seeds)' if n else ''} | {_cell(base['name'])}: {_num(base['mean'])}{_ci(base['ci'])} | "
            f"{_num(eff['mean'], True)}{_ci(eff['ci'], True)} | {_cell(f['verdict'])}: {_cell(f['why'])} |")  # fmt: skip


def _area_findings(root: Path, area: str) -> list[dict] | None:
    """An area's committed findings; None where its JSON is missing or still in the form issue 25 wrote (no
    ``findings`` list of :func:`bench._findings.finding` dicts: not yet re-measured over model seeds)."""
    path = root / "bench" / f"findings_{area}.json"
    found = json.loads(path.read_text()).get("findings") if path.exists() else None
    return found if isinstance(found, list) and all("verdict" in f and "effect" in f for f in found) else None


def pending(root: Path = ROOT) -> list[str]:
    """The areas whose findings are not yet re-measured over model seeds."""
    return [area for area in AREAS if _area_findings(root, area) is None]


def findings(root: Path = ROOT) -> list[dict]:
    """Every committed finding, area by area (a :func:`pending` area is left out)."""
    return [{**f, "area": area} for area in AREAS for f in _area_findings(root, area) or []]


def table(root: Path = ROOT) -> str:
    """The whole table: header and one row per finding, then the areas still pending, if any."""
    rows = [HEADER, *(row(f) for f in findings(root))]
    if pending(root):
        rows.append(f"\nNot yet re-measured over model seeds: {', '.join(pending(root))} (their sections below give "
                    "the issue-25 figures, over adapter seeds or one model pair).")
    return "\n".join(rows)


def write(design: Path = ROOT / "docs" / "DESIGN.md") -> None:
    """Replace what lies between the two markers of ``design`` with :func:`table`."""
    text = design.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    design.write_text(f"{head}{START}\n{table()}\n{END}{tail}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="replace the table in docs/DESIGN.md")
    if ap.parse_args().write:
        write()
    else:
        print(table())


if __name__ == "__main__":
    main()
