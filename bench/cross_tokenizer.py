"""Stitching a character GPT into a BPE GPT (issue 43): bits per byte by depth, every (i, j) cell, and the controls.

    python bench/cross_tokenizer.py [--seeds 0 1] [--store DIR] > bench/cross_tokenizer_cpu_DATE.json

Trains (or reads back from ``--store``, default ``.findings/cross``) the zoo's default GPT recipe on pydoc twice per
seed: ``--tokenizer char`` (A) and ``--tokenizer bpe:512`` (B), about 2.5 min each on two threads, the same models
``zoo train --arch gpt --dataset pydoc --seed S [--tokenizer bpe:512]`` makes.  Each seed gives one pair (char S ->
BPE S: no model in two pairs).  Per pair, through the store (``lmdepth`` runs, so a second call reads them back):

* ``closed_form``: every (i, j) stitch fitted in closed form (no training), as bits per byte above B alone, and
  the diagonal (B at A's relative depth) with both controls, for the ``last`` and the ``mean`` alignment;
* ``trained``: the diagonal with the default training (AdamW to convergence on held-out train text), the stitch
  and each control trained the same way.

Every number is on the same held-out windows (the last 10% of pydoc's characters); nothing is chosen on them.
Across pairs: the mean and a Student t 95% interval over the seeds (``measures.intervals.across_seeds``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitchcore.experiments import new_spec, run_experiment
from stitchcore.experiments.trait_presets import zoo_ref
from stitchcore.experiments.zoo import ZooRecipe
from stitchcore.measures.intervals import across_seeds
from stitchcore.store.results import Store

CONTROLS = ("shuffled_alignment", "random_a")


def recipe(seed: int, tokenizer: str) -> ZooRecipe:
    return ZooRecipe.from_dict({"arch": "gpt", "dataset": "pydoc", "seed": seed, "optimizer": "adamw",
                                "tokenizer": tokenizer})  # fmt: skip


def diagonal(summary: dict) -> list[dict]:
    return [{"split": p["split"], "receiver": p["receiver"], "bits_per_byte": p["bits_per_byte"],
             "bits_per_byte_ci": p["bits_per_byte_ci"], "steps": p["steps"],
             "controls": {t: {k: c.get(k) for k in ("bits_per_byte", "stitch_minus_control_ci", "stitch_better")}
                          for t, c in p["controls"].items()}} for p in summary["points"]]  # fmt: skip


def pair(store: Store, seed: int) -> dict:
    a, b = (zoo_ref(recipe(seed, t)) for t in ("char", "bpe:512"))
    out: dict = {"a": a, "b": b}
    for alignment in ("last", "mean"):
        spec = new_spec("lmdepth", {"a": a, "b": b, "modes": ["stitch"], "heads": ["b"], "steps": 0,
                                    "heatmap": alignment == "last", "alignment": alignment})  # fmt: skip
        s = run_experiment("lmdepth", spec, store).record.summary
        out.setdefault("b_bits_per_byte", [s["b_bits_per_byte"], s["b_bits_per_byte_ci"]])
        out.setdefault("a_bits_per_byte", [s["a_bits_per_byte"], s["a_bits_per_byte_ci"]])
        out[f"closed_form_{alignment}"] = {"diagonal": diagonal(s), "seconds": s["seconds"]}  # the run's own time
        if s.get("heatmap"):
            out[f"closed_form_{alignment}"]["heatmap"] = {k: s["heatmap"][k] for k in ("rows", "cols", "values")}
    spec = new_spec("lmdepth", {"a": a, "b": b, "modes": ["stitch"], "heads": ["b"]})  # today's training defaults
    s = run_experiment("lmdepth", spec, store).record.summary
    out["trained_last"] = {"diagonal": diagonal(s), "seconds": s["seconds"]}  # the run's own (stored runs: as run)
    return out


def over_seeds(pairs: list[dict], part: str) -> list[dict]:
    """Per split: the stitch's and each control's bits per byte, mean and 95% interval over the pairs."""
    rows = []
    for k, first in enumerate(pairs[0][part]["diagonal"]):
        row = {"split": first["split"]}
        for name, pick in (("stitched", lambda p: p["bits_per_byte"]),
                           *((t, lambda p, t=t: p["controls"][t]["bits_per_byte"]) for t in CONTROLS)):
            values = [pick(p[part]["diagonal"][k]) for p in pairs]
            mean, lo, hi = across_seeds(values) if len(values) > 1 else (values[0], None, None)
            row[name] = {"mean": round(mean, 4), "ci": None if lo is None else [round(lo, 4), round(hi, 4)],
                         "values": [round(v, 4) for v in values]}  # no interval under 3 pairs (across_seeds)
        row["stitch_beats_both_in"] = sum(all(p[part]["diagonal"][k]["controls"][t]["stitch_better"] for t in CONTROLS)
                                          for p in pairs)  # fmt: skip
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--store", default=".findings/cross")
    args = ap.parse_args()
    torch.set_num_threads(2)
    store = Store(args.store)
    t0 = time.perf_counter()
    for seed in args.seeds:
        for tokenizer in ("char", "bpe:512"):
            run_experiment("zoo", recipe(seed, tokenizer), store)
    pairs = [pair(store, seed) for seed in args.seeds]
    b = [p["b_bits_per_byte"][0] for p in pairs]
    a = [p["a_bits_per_byte"][0] for p in pairs]
    print(json.dumps({
        "what": "char-GPT (A) into BPE-512 GPT (B), zoo default recipe on pydoc; bits per byte of B's next-token "
                "loss on the held-out 10% of the text (lower is better)",
        "device": "cpu", "torch": torch.__version__, "threads": torch.get_num_threads(), "seeds": args.seeds,
        "b_alone": {"mean": round(sum(b) / len(b), 4), "values": b},
        "a_alone_own_tokens": {"mean": round(sum(a) / len(a), 4), "values": a},
        "intervals": "per pair: 95% over the held-out windows (pairs[].*_ci); over pairs: Student t from 3 pairs on "
                     "(measures.intervals.across_seeds), none with 2",
        "trained_last_over_seeds": over_seeds(pairs, "trained_last"),
        "closed_form_last_over_seeds": over_seeds(pairs, "closed_form_last"),
        "closed_form_mean_over_seeds": over_seeds(pairs, "closed_form_mean"),
        "pairs": pairs, "seconds": round(time.perf_counter() - t0, 1),
    }, indent=1))


if __name__ == "__main__":
    main()
