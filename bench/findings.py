"""Every paper finding the project re-measures, regenerated from its presets (JSON on stdout).

    STITCHLAB_JOB_THREADS=1 python bench/findings.py [--only assemble,traits,...] [--seeds 0 1 2 ...] [--out DIR]

Runs each ``bench/findings_<area>.py`` (assemble: Traft & Cheney; traits: the Oxford report; matrix:
Hernandez, Dangovski & Lu; lm: the GPT-2 report; bansal: Bansal, Nakkiran & Barak) in its own process on one
torch thread, each with its own defaults (seeds, sizes: see its docstring), and prints
``{"areas": {area: its JSON}, "seconds": {area: wall seconds}, "failed": {area: last lines of its stderr}}``, and
writes each area's JSON to ``--out`` (default: ``bench/``, the committed ``findings_<area>.json``; then
``python bench/findings_table.py --write`` regenerates the table in docs/DESIGN.md).  ``--seeds`` reruns every area
at other model seeds (each area's default otherwise; the LM area pairs them consecutively).
``docs/DESIGN.md`` quotes these figures beside the papers' (its sections "Assembling networks ...", "Traits
and simplicity", "Stitching matrices ...", "Language models", "Bansal et al.'s presets").  Settings were chosen
on validation splits (``digits|valNsS``), never on the test images the findings report.  Expect tens of
minutes on 2 cores for all areas.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def areas() -> list[str]:
    """The areas with a findings script, in the order of docs/DESIGN.md.

    >>> set(areas()) >= {"assemble", "traits", "matrix"}
    True
    """
    return sorted(p.stem.removeprefix("findings_") for p in BENCH.glob("findings_*.py") if p.stem != "findings_table")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated areas (default: all)")
    ap.add_argument("--out", default=str(BENCH), help="write each area's JSON to DIR/findings_<area>.json")
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="model seeds for every area")
    args = ap.parse_args()
    chosen = [a for a in args.only.split(",") if a] or areas()
    unknown = sorted(set(chosen) - set(areas()))
    if unknown:
        sys.exit(f"unknown area(s) {', '.join(unknown)}; use some of: {', '.join(areas())}")
    env = {**os.environ, "STITCHLAB_JOB_THREADS": os.environ.get("STITCHLAB_JOB_THREADS", "1")}
    out: dict = {"areas": {}, "seconds": {}, "failed": {}}
    for area in chosen:
        print(f"[findings] {area} ...", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        seeds = ["--seeds", *map(str, args.seeds)] if args.seeds else []
        proc = subprocess.run([sys.executable, str(BENCH / f"findings_{area}.py"), *seeds], env=env,
                              capture_output=True, text=True, check=False)  # fmt: skip
        out["seconds"][area] = round(time.monotonic() - t0)
        try:
            out["areas"][area] = json.loads(proc.stdout)
        except json.JSONDecodeError:
            out["failed"][area] = (proc.stderr or proc.stdout)[-2000:]
            continue
        if proc.returncode != 0 or "findings" not in out["areas"][area]:
            out["failed"][area] = f"exit {proc.returncode}, no findings list: " + (proc.stderr or "")[-2000:]
            continue
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / f"findings_{area}.json").write_text(json.dumps(out["areas"][area], indent=1))
    print(json.dumps(out, indent=1))
    sys.exit(1 if out["failed"] else 0)


if __name__ == "__main__":
    main()
